"""The policies' merge of provider hints, as pure functions.

Semantics are the kubelet's (``pkg/kubelet/cm/topologymanager``, policy.go and
the per-policy files):

* every provider's hints are flattened to one hint list per resource; a provider
  with no hints at all, or a resource mapped to None, is one preferred "any node"
  hint; a resource mapped to an empty list is one *non*-preferred "any node" hint;
* each permutation of the cross product (one hint per resource) merges to the
  bitwise AND of its masks ("any node" counting as all nodes); the merged hint is
  preferred only when every hint in it is preferred *and* all its non-"any"
  masks are equal (a provider that prefers {0,1} needs both nodes, so it is not
  satisfied by {0} although {0} is inside {0,1});
* empty merged masks are never chosen; a preferred merged hint beats any
  non-preferred one; between preferred hints the narrowest mask wins (fewer
  nodes, then the numerically smaller mask; with prefer-closest-numa-nodes the
  smaller average distance before that tie-break); between non-preferred hints
  the one whose node count is closest to, without exceeding, the largest of the
  resources' narrowest-hint counts wins (the kubelet's
  ``bestNonPreferredAffinityCount``); with no usable permutation the result is
  all nodes, not preferred;
* best-effort always admits; restricted admits only a preferred result;
  single-numa-node first keeps only preferred "any node" and preferred
  single-node hints, turns an all-nodes result into "any" (None), never applies
  prefer-closest, and admits only a preferred result.

The kubelet walks the cross product and keeps a running best with a pairwise
comparison. That comparison turns out to select the same hint whatever the
order of the candidates (see ``_select``), so the cross product is computed
here as the set of distinct merged hints, built resource by resource. The
number of distinct intermediate states is bounded by twice the number of masks,
not by the product of the list lengths, which keeps 8-NUMA-node machines cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .hints import Decision, ProviderHints, TopologyHint, format_affinity
from .numa import NUMAInfo, mask_of, nodes_of, popcount

__all__ = ["merge_hints", "flatten_hints", "ResourceHints"]

#: how many tried masks a refusal reason lists before "... and N more"
_REASON_MAX_MASKS = 8

_Hint = tuple[int | None, bool]  # (mask or None = any, preferred)
_State = tuple[int, bool, int | None]  # (AND so far, preferred so far, first non-any mask)


@dataclass(frozen=True)
class ResourceHints:
    """One entry of the flattened hints: a resource and the hints it takes part with."""

    #: the resource name; "" for a provider that gave no hints at all
    resource: str
    hints: tuple[_Hint, ...]
    #: what the provider said, for the refusal reason
    offered: tuple[TopologyHint, ...] | None


def flatten_hints(providers_hints: Sequence[ProviderHints]) -> list[ResourceHints]:
    """The kubelet's filterProvidersHints: one hint list per (provider, resource)."""
    out: list[ResourceHints] = []
    for provider in providers_hints:
        if not provider:
            out.append(ResourceHints("", ((None, True),), None))
            continue
        for resource, hints in provider.items():
            if hints is None:
                out.append(ResourceHints(resource, ((None, True),), None))
            elif len(hints) == 0:
                out.append(ResourceHints(resource, ((None, False),), ()))
            else:
                converted = tuple(_convert(resource, h) for h in hints)
                out.append(ResourceHints(resource, converted, tuple(hints)))
    return out


def _convert(resource: str, hint: TopologyHint) -> _Hint:
    if not isinstance(hint, TopologyHint):
        raise TypeError(f"hints for {resource!r} must be TopologyHint values, got {type(hint).__name__}")
    return (None if hint.affinity is None else mask_of(hint.affinity), bool(hint.preferred))


def _single_numa_filter(entries: list[ResourceHints]) -> list[ResourceHints]:
    """The kubelet's filterSingleNumaHints: keep preferred "any" and preferred one-node hints."""
    out = []
    for e in entries:
        kept = tuple(h for h in e.hints if h[1] and (h[0] is None or popcount(h[0]) == 1))
        out.append(ResourceHints(e.resource, kept, e.offered))
    return out


def _merged_candidates(default: int, lists: Sequence[Sequence[_Hint]]) -> set[tuple[int, bool]]:
    """Every distinct (merged mask, preferred) of the cross product of ``lists``.

    A state remembers the first non-"any" mask only while the permutation is
    still preferred, since only then can a later unequal mask change the
    outcome; non-preferred states collapse onto their mask alone.
    """
    states: set[_State] = {(default, True, None)}
    for hints in lists:
        nxt: set[_State] = set()
        for mask, pref, first in states:
            for hmask, hpref in hints:
                if hmask is None:
                    p = pref and hpref
                    nxt.add((mask, p, first if p else None))
                    continue
                merged = mask & hmask
                if pref and hpref and (first is None or first == hmask):
                    nxt.add((merged, True, hmask))
                else:
                    nxt.add((merged, False, None))
        states = nxt
        if not states:
            break
    return {(mask, pref) for mask, pref, _ in states}


def _best_non_preferred_count(lists: Sequence[Sequence[_Hint]]) -> int:
    """The kubelet's maxOfMinAffinityCounts: the node count of the resource that
    needs the most nodes at its narrowest."""
    best = 0
    for hints in lists:
        masks = [m for m, _ in hints if m is not None]
        if masks:
            best = max(best, min(popcount(m) for m in masks))
    return best


def _select(
    candidates: set[tuple[int, bool]], target: int, numa: NUMAInfo, closest: bool
) -> tuple[int, bool] | None:
    """The hint the kubelet's running comparison (HintMerger.compare) ends on.

    Its pairwise rule is: preferred beats non-preferred; two preferred pick the
    fitter mask; two non-preferred steer towards ``target`` nodes: a count equal
    to the target is kept against anything but a fitter mask of the same count,
    below the target the larger count wins, above it the fitter (narrower) mask.
    Worked through, the survivor does not depend on the order of the candidates:
    the fittest preferred mask if any; else the fittest with exactly ``target``
    nodes; else, among those below the target, the fittest with the largest
    count; else the fittest of all. ``tests/unit/topologymanager`` checks this
    against a literal sequential port of the kubelet's comparison.
    """
    usable = [c for c in candidates if c[0] != 0]
    if not usable:
        return None

    def key(c: tuple[int, bool]) -> tuple[int, ...]:
        return numa.fitness_key(c[0], closest)

    preferred = [c for c in usable if c[1]]
    if preferred:
        return min(preferred, key=key)
    at_target = [c for c in usable if popcount(c[0]) == target]
    if at_target:
        return min(at_target, key=key)
    below = [c for c in usable if popcount(c[0]) < target]
    if below:
        most = max(popcount(c[0]) for c in below)
        return min((c for c in below if popcount(c[0]) == most), key=key)
    return min(usable, key=key)


def _merge_entries(
    entries: list[ResourceHints], numa: NUMAInfo, closest: bool
) -> tuple[tuple[int, bool], set[tuple[int, bool]]]:
    lists = [e.hints for e in entries]
    candidates = _merged_candidates(numa.default_mask, lists)
    best = _select(candidates, _best_non_preferred_count(lists), numa, closest)
    return (best if best is not None else (numa.default_mask, False)), candidates


def merge_hints(policy: str, numa: NUMAInfo, providers_hints: Sequence[ProviderHints]) -> Decision:
    """Merge per the named policy; the policy "none" is handled by the caller."""
    entries = flatten_hints(providers_hints)
    single = policy == "single-numa-node"
    if single:
        entries = _single_numa_filter(entries)
    closest = numa.prefer_closest and not single
    (mask, preferred), candidates = _merge_entries(entries, numa, closest)
    affinity: frozenset[int] | None = nodes_of(mask)
    if single and mask == numa.default_mask:
        affinity = None
    hint = TopologyHint(affinity, preferred)
    if policy == "best-effort" or preferred:
        return Decision(hint, True)
    tried = tuple(
        nodes_of(m) for m, _ in sorted((c for c in candidates if c[0]), key=lambda c: numa.fitness_key(c[0], closest))
    )
    resource, why = _diagnose(entries, numa, closest, single)
    reason = _reason(policy, why, entries, tried)
    return Decision(hint, False, reason, resource, tried)


def _diagnose(entries: list[ResourceHints], numa: NUMAInfo, closest: bool, single: bool) -> tuple[str, str]:
    """Which resource is to blame for a refusal, and a phrase that says why.

    First the resources that have no acceptable hint on their own (an empty hint
    list, or under single-numa-node nothing on one node); failing that, the
    resources without which the others would align.
    """
    named = [e for e in entries if e.resource]
    alone = [e.resource for e in named if not any(pref for _, pref in e.hints)]
    where = "on a single NUMA node" if single else "with NUMA locality"
    if alone:
        names = _unique(alone)
        verb = "has" if len(names) == 1 else "have"
        return (names[0] if len(names) == 1 else ""), f"{', '.join(names)} {verb} no preferred placement {where}"
    culprits = []
    for i, e in enumerate(entries):
        if not e.resource:
            continue
        (_, pref), _ = _merge_entries(entries[:i] + entries[i + 1 :], numa, closest)
        if pref:
            culprits.append(e.resource)
    culprits = _unique(culprits)
    if len(culprits) == 1:
        others = _unique([e.resource for e in named if e.resource != culprits[0]])
        tail = f" with {', '.join(others)}" if others else ""
        return culprits[0], f"{culprits[0]} cannot be aligned{tail} {where}"
    names = _unique([e.resource for e in named])
    return "", f"{', '.join(names) or 'the resources'} cannot be aligned together {where}"


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _reason(policy: str, why: str, entries: list[ResourceHints], tried: tuple[frozenset[int], ...]) -> str:
    offered = "; ".join(_describe(e) for e in entries if e.resource)
    if tried:
        shown = ", ".join(format_affinity(m) for m in tried[:_REASON_MAX_MASKS])
        more = f" and {len(tried) - _REASON_MAX_MASKS} more" if len(tried) > _REASON_MAX_MASKS else ""
        masks = f"masks tried (none preferred): {shown}{more}"
    else:
        masks = "no mask could be tried"
    return f"topology affinity error (policy {policy}): {why}; hints: {offered or 'none'}; {masks}"


def _describe(entry: ResourceHints) -> str:
    if entry.offered is None:
        return f"{entry.resource}=any"
    if not entry.offered:
        return f"{entry.resource}=unsatisfiable"
    return f"{entry.resource}=[{', '.join(str(h) for h in entry.offered)}]"
