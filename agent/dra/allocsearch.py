"""The allocator's two searches over a claim's requests (pure; devices are
positions in preference order, selector verdicts already known or looked up).

``exact_search`` walks as Kubernetes' structured allocator walks: request by
request, device by device in order, a device taken by this claim skipped, a
device whose selector verdict is an error ending the search with that error
the moment it is reached, a candidate that breaks a ``matchAttribute`` with
what is already chosen never tried, the first complete answer taken. Within a
request it tries sets in combination order, which reaches the same first
answer and evaluates the same devices as upstream's permutation order (a set
found in another order is a state already explored). It is used when some
selector fails on some device, because then *which* devices get evaluated
decides the verdict, and when an ``All`` request shares a constraint with a
request before it: upstream stops with an error when an ``All`` device breaks
a constraint with what the walk chose first, rather than backtrack.

``fast_search`` is used when no selector fails anywhere: only whether an
answer exists matters, so it prunes: a request whose devices are all forced
(``All``) is placed first and its devices taken from the others; a request
under constraints picks a value group (devices sharing the constrained
attributes' values) big enough for its count, never a mix; devices that are
interchangeable for the requests after it (same candidacy, same constrained
values, same NUMA alignment) are chosen by count, not by identity; and a
remainder already proven unsatisfiable is remembered. What is left is the
truly exponential case (many requests sharing devices under constraints on
values that differ device by device); it gives up after ``MAX_TRIES`` partial
answers with a message that says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Problem", "SearchAbort", "Exponential", "exact_search", "fast_search", "MAX_TRIES"]

#: partial answers tried before giving up, in either search
MAX_TRIES = 200_000
MISSING: Any = object()


class SearchAbort(Exception):
    """The search stopped where upstream's stops with an error: a device whose selector failed, or an
    ``All`` request's device that breaks a constraint: ``(request index, position, error or text)``."""


class Exponential(Exception):
    """The search gave up after ``MAX_TRIES`` partial answers."""


@dataclass
class Problem:
    #: per request: "ExactCount" or "All", and the count
    modes: Sequence[str]
    counts: Sequence[int]
    #: number of devices (positions 0..n-1 in preference order) and which are free of other claims
    n: int
    free: Sequence[bool]
    #: verdict(request, position) -> True / False, or raises the selector's error
    verdict: Callable[[int, int], bool]
    #: per constraint: the request indexes it binds
    binds: Sequence[frozenset[int]]
    #: value(constraint, position) -> the typed attribute value, or MISSING
    value: Callable[[int, int], Any]
    #: per position: aligned with the preferred NUMA nodes (a tie-break for fast_search)
    aligned: Sequence[bool] = ()
    tries: int = field(default=0)

    def tick(self) -> None:
        self.tries += 1
        if self.tries > MAX_TRIES:
            raise Exponential()

    def binding(self, r: int) -> list[int]:
        return [c for c, reqs in enumerate(self.binds) if r in reqs]


def _fits(p: Problem, r: int, pos: int, fixed: dict[int, Any]) -> dict[int, Any] | None:
    """``fixed`` extended with this device's values for the constraints binding ``r``, or None
    when it lacks one or differs from what is already chosen."""
    out = fixed
    for c in p.binding(r):
        v = p.value(c, pos)
        if v is MISSING:
            return None
        if c in out:
            if out[c] != v:
                return None
        else:
            out = {**out, c: v}
    return out


# -- exact: upstream's walk ------------------------------------------------------------------------

def exact_search(p: Problem) -> list[list[int]] | None:
    """Per request the positions chosen, or None; ``SearchAbort`` where upstream's walk errors."""
    out: list[list[int]] = [[] for _ in p.modes]

    def level(r: int, i: int, start: int, used: frozenset[int], fixed: dict[int, Any]) -> bool:
        if r == len(p.modes):
            return True
        if p.modes[r] == "All":
            return all_request(r, used, fixed)
        if i == p.counts[r]:
            return level(r + 1, 0, 0, used, fixed)
        for pos in range(start, p.n):
            if not p.free[pos] or pos in used:
                continue
            if not p.verdict(r, pos):
                continue
            nfixed = _fits(p, r, pos, fixed)
            if nfixed is None:
                continue
            p.tick()
            out[r].append(pos)
            if level(r, i + 1, pos + 1, used | {pos}, nfixed):
                return True
            out[r].pop()
        return False

    def all_request(r: int, used: frozenset[int], fixed: dict[int, Any]) -> bool:
        mine = [pos for pos in range(p.n) if p.verdict(r, pos)]
        if not mine or any(not p.free[pos] or pos in used for pos in mine):
            return False
        nfixed = fixed
        for pos in mine:
            step = _fits(p, r, pos, nfixed)
            if step is None:  # upstream's allocator does not backtrack here: it stops with an error
                raise SearchAbort(r, pos, "cannot add the device because a claim constraint would not be "
                                          "satisfied (an All request's devices are not chosen, so Kubernetes' "
                                          "allocator gives up here rather than try other devices before it)")
            nfixed = step
        p.tick()
        out[r] = mine
        if level(r + 1, 0, 0, used | frozenset(mine), nfixed):
            return True
        out[r] = []
        return False

    return out if level(0, 0, 0, frozenset(), {}) else None


# -- fast: feasibility with pruning ------------------------------------------------------------------

def _compositions(sizes: Sequence[int], need: int) -> Iterator[list[int]]:
    """Every way of taking ``need`` items from classes of these sizes, most from the first class first."""
    if not sizes:
        if need == 0:
            yield []
        return
    rest = sum(sizes[1:])
    for take in range(min(sizes[0], need), max(0, need - rest) - 1, -1):
        for tail in _compositions(sizes[1:], need - take):
            yield [take, *tail]


def fast_search(p: Problem) -> list[list[int]] | None:
    """Per request the positions chosen, or None; every verdict must be True or False here."""
    out: list[list[int]] = [[] for _ in p.modes]
    taken: set[int] = set()
    fixed: dict[int, Any] = {}
    # forced requests first: their devices are no one else's
    for r, mode in enumerate(p.modes):
        if mode != "All":
            continue
        mine = [pos for pos in range(p.n) if p.verdict(r, pos)]
        if not mine or any(not p.free[pos] or pos in taken for pos in mine):
            return None
        for pos in mine:
            nfixed = _fits(p, r, pos, fixed)
            if nfixed is None:
                return None
            fixed = nfixed
        out[r] = mine
        taken.update(mine)
    order = [r for r, mode in enumerate(p.modes) if mode != "All"]
    cands = {r: [pos for pos in range(p.n) if p.free[pos] and pos not in taken and p.verdict(r, pos)] for r in order}
    candset = {r: frozenset(c) for r, c in cands.items()}
    relevant = [frozenset().union(*(candset[r] for r in order[k:])) for k in range(len(order) + 1)]
    later_binds = [sorted({c for r in order[k:] for c in p.binding(r)}) for k in range(len(order) + 1)]
    failed: set[tuple[Any, ...]] = set()

    def solve(k: int, avail: frozenset[int], fixed: dict[int, Any]) -> bool:
        if k == len(order):
            return True
        key = (k, avail & relevant[k], tuple((c, fixed[c]) for c in later_binds[k] if c in fixed))
        if key in failed:
            return False
        r, need = order[k], p.counts[order[k]]
        eff = [pos for pos in cands[r] if pos in avail and _fits(p, r, pos, fixed) is not None]
        unfixed = [c for c in p.binding(r) if c not in fixed]
        groups: dict[tuple[Any, ...], list[int]] = {}
        for pos in eff:
            groups.setdefault(tuple(p.value(c, pos) for c in unfixed), []).append(pos)
        later = order[k + 1:]
        for values, members in groups.items():
            if len(members) < need:
                continue
            nfixed = {**fixed, **dict(zip(unfixed, values, strict=True))}
            classes: dict[tuple[Any, ...], list[int]] = {}
            for pos in members:
                sig = (tuple(pos in candset[q] for q in later), tuple(p.value(c, pos) for c in later_binds[k + 1]),
                       p.aligned[pos] if p.aligned else True)
                classes.setdefault(sig, []).append(pos)
            # aligned devices first, then the ones later requests cannot use, then preference order
            ordered = sorted(classes.items(), key=lambda kv: (not kv[0][2], sum(kv[0][0]), kv[1][0]))
            for counts in _compositions([len(c) for _, c in ordered], need):
                p.tick()
                pick = [pos for (_, c), m in zip(ordered, counts, strict=True) for pos in c[:m]]
                if solve(k + 1, avail - frozenset(pick), nfixed):
                    out[r] = sorted(pick)
                    return True
        failed.add(key)
        return False

    everything = frozenset(pos for pos in range(p.n) if p.free[pos] and pos not in taken)
    return out if solve(0, everything, fixed) else None
