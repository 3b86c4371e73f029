"""Allocating a ResourceClaim on this node (pure): which devices satisfy its
requests, selectors and constraints, none of them held by another claim.

As the scheduler's structured allocator does: each request's candidates are
the devices its DeviceClass's selectors and its own selectors accept (CEL);
``ExactCount`` takes ``count`` of them, ``All`` takes every one (and fails
when one of them is held elsewhere, or there is none); ``matchAttribute``
constraints require one value of the named attribute across the devices of
the requests they bind (a device without the attribute cannot satisfy one).
The search backtracks over the requests in order, trying candidates in
preference order (devices on the preferred NUMA nodes first, then by pool and
name), and gives up after a bounded number of steps rather than hang
admission on a pathological claim.

``claim_hints`` is the topology manager's view: on which NUMA node sets a
pod's claims can be allocated together with devices local to them (devices
without locality fit anywhere), the narrowest preferred, as the device
manager's hints are.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from agent.dra.catalog import DeviceKey, DraDevice
from agent.dra.cel import CELError, device_activation, matches
from agent.dra.claims import AllocatedDevice, ClaimError, DeviceClass, ResourceClaim

__all__ = ["AllocationRefused", "allocate", "candidates", "claim_hints", "MAX_STEPS", "MAX_HINT_NODES"]

#: the search's bound: devices tried across the backtracking, per claim
MAX_STEPS = 20_000
_UNSET = object()


class AllocationRefused(ClaimError):
    """The claim cannot be allocated now; the message says which request and why."""


@dataclass
class _Search:
    claim: ResourceClaim
    cands: dict[str, list[DraDevice]]
    steps: int = 0


def candidates(claim: ResourceClaim, classes: Mapping[str, DeviceClass], devices: Sequence[DraDevice],
               held: Mapping[DeviceKey, str]) -> dict[str, list[DraDevice]]:
    """Per request, the devices its class and selectors accept and no other claim holds.

    ``held`` maps a device to the UID of the claim holding it; the claim's own
    UID does not count (a re-allocation of the same claim). Raises
    ``AllocationRefused`` for an unknown class, a failing selector, or an
    ``All`` request that finds a matching device held elsewhere.
    """
    acts = {d.key: device_activation(d.driver, d.attributes, d.capacity) for d in devices}
    out: dict[str, list[DraDevice]] = {}
    for req in claim.requests:
        cls = classes.get(req.device_class)
        if cls is None:
            raise AllocationRefused(f"claim {claim.namespace}/{claim.name} request {req.name}: DeviceClass "
                                    f"{req.device_class!r} is not defined (add it to the dra directory)")
        exprs = cls.selectors + req.selectors
        found = []
        for d in devices:
            try:
                ok = all(matches(e, acts[d.key], d.name) for e in exprs)
            except CELError as e:
                raise AllocationRefused(f"claim {claim.namespace}/{claim.name} request {req.name}: {e}") from None
            if not ok:
                continue
            owner = held.get(d.key)
            if owner is not None and owner != claim.uid:
                if req.mode == "All":
                    raise AllocationRefused(
                        f"claim {claim.namespace}/{claim.name} request {req.name} asks for All devices, and "
                        f"{d.name} (pool {d.pool}) is held by claim {owner}")
                continue
            found.append(d)
        out[req.name] = found
    return out


def _prefer(devs: Iterable[DraDevice], numa: frozenset[int] | None) -> list[DraDevice]:
    def rank(d: DraDevice) -> tuple[int, str, str]:
        aligned = numa is None or d.numa_node is None or d.numa_node in numa
        return (0 if aligned else 1, d.pool, d.name)

    return sorted(devs, key=rank)


def _binding(claim: ResourceClaim, request: str) -> list[str]:
    """The constraint attributes that bind ``request``."""
    return [c.match_attribute for c in claim.constraints if not c.requests or request in c.requests]


def _fits(devs: Sequence[DraDevice], attrs: Sequence[str], fixed: dict[str, object]) -> dict[str, object] | None:
    """``fixed`` extended with these devices' values, or None when a constraint breaks."""
    out = dict(fixed)
    for a in attrs:
        for d in devs:
            if a not in d.attributes:
                return None
            v = d.attributes[a]
            if out.get(a, _UNSET) is _UNSET:
                out[a] = v
            elif out[a] != v:
                return None
    return out


def _search(s: _Search, i: int, used: frozenset[DeviceKey], fixed: dict[str, object],
            chosen: list[tuple[str, DraDevice]]) -> list[tuple[str, DraDevice]] | None:
    reqs = s.claim.requests
    if i == len(reqs):
        return chosen
    req = reqs[i]
    attrs = _binding(s.claim, req.name)
    pool = [d for d in s.cands[req.name] if d.key not in used]
    if req.mode == "All":
        if not s.cands[req.name] or len(pool) != len(s.cands[req.name]):
            return None
        combos: Iterable[tuple[DraDevice, ...]] = [tuple(pool)]
    else:
        combos = itertools.combinations(pool, req.count)
    for combo in combos:
        s.steps += len(combo)
        if s.steps > MAX_STEPS:
            raise AllocationRefused(f"claim {s.claim.namespace}/{s.claim.name}: no allocation found within "
                                    f"{MAX_STEPS} steps; loosen its constraints or selectors")
        nfixed = _fits(combo, attrs, fixed)
        if nfixed is None:
            continue
        got = _search(s, i + 1, used | {d.key for d in combo}, nfixed, chosen + [(req.name, d) for d in combo])
        if got is not None:
            return got
    return None


def allocate(claim: ResourceClaim, classes: Mapping[str, DeviceClass], devices: Sequence[DraDevice],
             held: Mapping[DeviceKey, str], numa: frozenset[int] | None = None) -> tuple[AllocatedDevice, ...]:
    """The claim's allocation results (request order, then preference), or ``AllocationRefused``.

    ``numa`` is the topology manager's affinity: devices local to it are tried
    first; others are taken when the aligned ones cannot satisfy the claim
    (the topology manager's policy has already decided whether that is allowed).
    Pure: nothing is recorded; the caller records the answer.
    """
    cands = {name: _prefer(devs, numa) for name, devs in candidates(claim, classes, devices, held).items()}
    for req in claim.requests:
        have = len(cands[req.name])
        if req.mode == "All" and have == 0:
            raise AllocationRefused(f"claim {claim.namespace}/{claim.name} request {req.name}: no device of class "
                                    f"{req.device_class} matches (allocationMode All needs at least one)")
        if req.mode == "ExactCount" and have < req.count:
            raise AllocationRefused(f"claim {claim.namespace}/{claim.name} request {req.name}: needs {req.count} "
                                    f"device(s) of class {req.device_class}, {have} free match")
    got = _search(_Search(claim, cands), 0, frozenset(), {}, [])
    if got is None:
        attrs = ", ".join(c.match_attribute for c in claim.constraints) or "none"
        raise AllocationRefused(f"claim {claim.namespace}/{claim.name}: no set of free devices satisfies its "
                                f"requests together with its constraints (matchAttribute: {attrs})")
    return tuple(AllocatedDevice(req, d.driver, d.pool, d.name) for req, d in got)


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
