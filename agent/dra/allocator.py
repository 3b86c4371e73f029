"""Allocating a ResourceClaim on this node (pure): which devices satisfy its
requests, selectors and constraints, none of them held by another claim, decided
as Kubernetes' structured allocator (``k8s.io/dynamic-resource-allocation/
structured``, the release that serves ``resource.k8s.io/v1``) decides.

Each request's candidates are the devices its DeviceClass's selectors and its
own selectors accept (CEL, ``agent.dra.cel``); ``ExactCount`` takes ``count``
of them, ``All`` every one (refused when one is held elsewhere or when there
is none); a ``matchAttribute`` constraint needs one typed value of the
attribute across the devices of the requests it binds (a device without it
cannot satisfy it; an int, a bool, a string and a version are never equal).

A selector that fails on a device (a missing attribute without ``has()``, a
type with no overload, the cost limit) does what it does upstream: a device
held by another claim is skipped before its selectors are evaluated; an
``All`` request evaluates every device of the node up front and an error
there refuses the claim; an ``ExactCount`` request's devices are evaluated as
the search reaches them, in order, and an error refuses the claim only if
the search reaches that device before it has an answer (``allocsearch``).

Devices are tried in preference order: those on the preferred NUMA nodes first,
then by pool and in the slice's order. Where upstream's order decides the verdict
(a selector fails on some device, or an ``All`` request shares a constraint
with a request before it) and the preference changes the order, the claim is
first walked without it (an error there refuses the claim, as upstream), then
the preferred answer is chosen among the devices whose selectors match, or
upstream's answer where the preferred walk finds none. There is no step bound on ordinary
claims; only the truly exponential search gives up, saying so.

``claim_hints`` is the topology manager's view: on which NUMA node sets a
pod's claims can be allocated together with devices local to them (devices
without locality fit anywhere), the narrowest preferred, as the device
manager's hints are.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from agent.dra.allocsearch import MAX_TRIES, MISSING, Exponential, Problem, SearchAbort, exact_search, fast_search
from agent.dra.catalog import DeviceKey, DraDevice, typed
from agent.dra.cel import CELError, device_activation, matches
from agent.dra.claims import AllocatedDevice, ClaimError, DeviceClass, ResourceClaim

__all__ = ["AllocationRefused", "allocate", "claim_hints", "MAX_TRIES", "MAX_HINT_NODES"]


class AllocationRefused(ClaimError):
    """The claim cannot be allocated now; the message says which request and why."""


def _prefer(devs: Sequence[DraDevice], numa: frozenset[int] | None) -> list[DraDevice]:
    """Preference order: aligned with ``numa`` first, then pool, then the given (slice) order."""
    def rank(d: DraDevice) -> tuple[int, str]:
        aligned = numa is None or d.numa_node is None or d.numa_node in numa
        return (0 if aligned else 1, d.pool)

    return sorted(devs, key=rank)


class _Verdicts:
    """Selector verdicts per (request, device), evaluated once each; an error is kept and raised
    (as ``SearchAbort``) each time it is looked up."""

    def __init__(self, claim: ResourceClaim, exprs: Sequence[Sequence[str]], devices: Sequence[DraDevice]) -> None:
        self.claim, self.exprs, self.devices = claim, exprs, devices
        self.acts: dict[int, Any] = {}
        self.cache: dict[tuple[int, int], bool | CELError] = {}

    def get(self, r: int, pos: int) -> bool | CELError:
        key = (r, pos)
        if key not in self.cache:
            d = self.devices[pos]
            if pos not in self.acts:
                self.acts[pos] = device_activation(d.driver, d.attributes, d.capacity)
            try:  # selectors in order, the class's first; the first false one decides
                self.cache[key] = all(matches(e, self.acts[pos], d.name) for e in self.exprs[r])
            except CELError as e:
                self.cache[key] = e
        return self.cache[key]

    def __call__(self, r: int, pos: int) -> bool:
        v = self.get(r, pos)
        if isinstance(v, CELError):
            if self.lenient:
                return False
            raise SearchAbort(r, pos, v)
        return v

    #: a device whose selector fails counts as not matching (once upstream's order has found an answer)
    lenient = False


def _refuse(claim: ResourceClaim, msg: str) -> AllocationRefused:
    return AllocationRefused(f"claim {claim.namespace}/{claim.name}{msg}")


def allocate(claim: ResourceClaim, classes: Mapping[str, DeviceClass], devices: Sequence[DraDevice],
             held: Mapping[DeviceKey, str], numa: frozenset[int] | None = None) -> tuple[AllocatedDevice, ...]:
    """The claim's allocation results (request order, then preference), or ``AllocationRefused``.

    ``held`` maps a device to the UID of the claim holding it; the claim's own UID
    does not count (a re-allocation of the same claim). ``numa`` is the topology
    manager's affinity: devices local to it are tried first; others are taken when
    the aligned ones cannot satisfy the claim (the topology manager's policy has
    already decided whether that is allowed). Pure: nothing is recorded.
    """
    exprs = []
    for req in claim.requests:
        cls = classes.get(req.device_class)
        if cls is None:
            raise _refuse(claim, f" request {req.name}: DeviceClass {req.device_class!r} is not defined "
                                 "(add it to the dra directory)")
        exprs.append(tuple(cls.selectors) + tuple(req.selectors))
    order = _prefer(devices, numa)
    free = [held.get(d.key) in (None, claim.uid) for d in order]
    verdicts = _Verdicts(claim, exprs, order)

    _check_all_requests(claim, order, free, held, verdicts)
    _check_size(claim, order, verdicts)
    errors = _check_counts(claim, order, free, verdicts)
    problem = Problem(
        modes=[req.mode for req in claim.requests], counts=[req.count for req in claim.requests],
        n=len(order), free=free, verdict=verdicts,
        binds=[frozenset(range(len(claim.requests))) if not c.requests else
               frozenset(i for i, req in enumerate(claim.requests) if req.name in c.requests)
               for c in claim.constraints],
        value=lambda c, pos: _value(order[pos], claim.constraints[c].match_attribute),
        aligned=[numa is None or d.numa_node is None or d.numa_node in numa for d in order])
    walk = errors or _all_after_constrained(claim, problem.binds)
    upstream: tuple[AllocatedDevice, ...] | None = None
    if walk and numa is not None and order != _prefer(devices, None):
        # upstream has no NUMA preference, and here its order decides whether the claim errors: walk
        # it so first (its error refuses the claim); then prefer, among the devices that match, an
        # answer on the pod's nodes, falling back to upstream's where the preferred walk stops short
        upstream = allocate(claim, classes, devices, held, None)
        verdicts.lenient = True
        walk = _all_after_constrained(claim, problem.binds)
    try:
        got = _search(claim, order, problem, walk, errors)
    except AllocationRefused:
        if upstream is not None:
            return upstream
        raise
    return tuple(AllocatedDevice(req.name, order[pos].driver, order[pos].pool, order[pos].name)
                 for req, picks in zip(claim.requests, got, strict=True) for pos in picks)


def _search(claim: ResourceClaim, order: Sequence[DraDevice], problem: Problem, walk: bool,
            errors: bool) -> list[list[int]]:
    """Per request the positions chosen, in upstream's walk or the pruned search; the refusal
    that says why there is none."""
    try:
        got = exact_search(problem) if walk else fast_search(problem)
    except SearchAbort as e:
        r, pos, err = e.args
        where = "" if isinstance(err, CELError) else f"device {order[pos].name} (pool {order[pos].pool}): "
        raise _refuse(claim, f" request {claim.requests[r].name}: {where}{err}") from None
    except Exponential:
        why = ("a selector fails on some devices, so the search must walk devices in order as upstream's does"
               if errors else "its requests share candidate devices under constraints whose values differ "
                              "device by device")
        raise _refuse(claim, f": gave up after {MAX_TRIES} partial allocations without finding one or proving "
                             f"there is none: the search is exponential here ({why}); give its requests "
                             "disjoint device classes or fewer constraints") from None
    if got is None:
        attrs = ", ".join(c.match_attribute for c in claim.constraints) or "none"
        raise _refuse(claim, f": no set of free devices satisfies its requests together with its constraints "
                             f"(matchAttribute: {attrs})")
    return got


def _all_after_constrained(claim: ResourceClaim, binds: Sequence[frozenset[int]]) -> bool:
    """Whether an ``All`` request shares a constraint with an ``ExactCount`` request before it:
    then upstream's order decides (it stops with an error where the two disagree)."""
    return any(claim.requests[r].mode == "All" and any(q < r and claim.requests[q].mode != "All" for q in reqs)
               for reqs in binds for r in reqs)


def _check_all_requests(claim: ResourceClaim, order: Sequence[DraDevice], free: Sequence[bool],
                        held: Mapping[DeviceKey, str], verdicts: _Verdicts) -> None:
    """``All`` requests evaluate every device of the node first, held or not (upstream's
    validation): an error, a matching device held elsewhere, or no matching device refuses."""
    for r, req in enumerate(claim.requests):
        if req.mode != "All":
            continue
        for pos, d in enumerate(order):
            v = verdicts.get(r, pos)
            if isinstance(v, CELError):
                raise _refuse(claim, f" request {req.name}: {v}")
            if v and not free[pos]:
                raise _refuse(claim, f" request {req.name} asks for All devices, and {d.name} (pool {d.pool}) "
                                     f"is held by claim {held.get(d.key)}")
        if not any(verdicts.get(r, pos) for pos in range(len(order))):
            raise _refuse(claim, f" request {req.name}: no device of class {req.device_class} matches "
                                 "(allocationMode All needs at least one)")


#: resource.k8s.io's AllocationResultsMaxSize: the most devices one claim's allocation may hold
MAX_RESULTS = 32


def _check_size(claim: ResourceClaim, order: Sequence[DraDevice], verdicts: _Verdicts) -> None:
    """Refuse a claim whose allocation would hold more than ``MAX_RESULTS`` devices, counted over
    all its requests (``count`` for ``ExactCount``, every matching device for ``All``), before any
    search, as upstream does: the allocation result could not be stored."""
    total = sum(req.count if req.mode != "All" else sum(1 for pos in range(len(order)) if verdicts.get(r, pos) is True)
                for r, req in enumerate(claim.requests))
    if total > MAX_RESULTS:
        raise _refuse(claim, f": number of requested devices {total} exceeds the claim limit of {MAX_RESULTS}")


def _check_counts(claim: ResourceClaim, order: Sequence[DraDevice], free: Sequence[bool],
                  verdicts: _Verdicts) -> bool:
    """Whether a selector fails on some free device of an ``ExactCount`` request (then the walk's
    order decides the verdict); without such an error, a request with too few matching free
    devices is refused at once."""
    errors = False
    for r, req in enumerate(claim.requests):
        if req.mode == "All":
            continue
        found = [verdicts.get(r, pos) for pos in range(len(order)) if free[pos]]
        errors = errors or any(isinstance(v, CELError) for v in found)
        have = sum(1 for v in found if v is True)
        if have < req.count and not errors:
            raise _refuse(claim, f" request {req.name}: needs {req.count} device(s) of class {req.device_class}, "
                                 f"{have} free match")
    return errors


def _value(d: DraDevice, attribute: str) -> Any:
    """A device's typed value of a fully qualified attribute, looked up as upstream does (the
    driver's own domain also finds an unqualified name), or MISSING."""
    if attribute in d.attributes:
        return typed(d.attributes[attribute])
    domain, _, ident = attribute.partition("/")
    if domain == d.driver and ident in d.attributes:
        return typed(d.attributes[ident])
    return MISSING


#: above this many NUMA nodes only single nodes and all of them are tried as hints (2^n sets otherwise)
MAX_HINT_NODES = 8


def claim_hints(claims: Sequence[ResourceClaim], classes: Mapping[str, DeviceClass], devices: Sequence[DraDevice],
                held: Mapping[DeviceKey, str], numa_nodes: Sequence[int]) -> list[tuple[frozenset[int], bool]] | None:
    """(NUMA node set, preferred) for every set on which the claims fit together with local devices
    only (devices without locality fit anywhere); the sets of the fewest nodes are preferred.

    None means no preference: no device has locality, or the claims do not fit even on every node
    (the allocation then says why, which a bare "no hint" would hide). ``[]`` cannot happen then.
    """
    nodes = sorted(set(numa_nodes))
    if not claims or not nodes or all(d.numa_node is None for d in devices):
        return None
    if len(nodes) <= MAX_HINT_NODES:
        masks = [frozenset(m) for size in range(1, len(nodes) + 1) for m in itertools.combinations(nodes, size)]
    else:
        masks = [frozenset({n}) for n in nodes] + [frozenset(nodes)]
    out = [m for m in masks if _fits_on(claims, classes, devices, held, m)]
    if not out or frozenset(nodes) not in out:
        return None
    best = min(len(m) for m in out)
    return [(m, len(m) == best) for m in out]


def _fits_on(claims: Sequence[ResourceClaim], classes: Mapping[str, DeviceClass], devices: Sequence[DraDevice],
             held: Mapping[DeviceKey, str], mask: frozenset[int]) -> bool:
    local = [d for d in devices if d.numa_node is None or d.numa_node in mask]
    taken = dict(held)
    for claim in claims:
        try:
            got = allocate(claim, classes, local, taken, mask)
        except AllocationRefused:
            return False
        taken.update({(r.driver, r.pool, r.device): claim.uid for r in got})
    return True
