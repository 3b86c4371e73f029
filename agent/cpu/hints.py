"""Topology hints for dedicated_cores + numa_binding (upstream calculateHints).

Walks NUMA-node masks by size, then lexicographically (kubelet's bitmask
iteration order), keeping masks that can hold the request.

Deliberate difference (quirk 14.2): the minimal mask size is computed from the
*allocatable* CPUs per NUMA (reserved CPUs excluded), as the largest
allocatable k-node combination that reaches the request, instead of
``ceil(req / (NumCPUs/NumNUMA))``. On the upstream fixture the hints are the same;
on machines where reserve makes a node too small, the hints no longer claim
"preferred" for a mask size nothing can satisfy.
"""

from __future__ import annotations

from itertools import combinations

from agent.contracts.hints import TopologyHint
from agent.cpu.calculator import TopoIndex
from agent.cpu.errors import PolicyError, RESOURCE_EXHAUSTED, invalid
from agent.cpu.state import NUMAState
from agent.cpuset import CPUSet

__all__ = ["calculate_hints", "min_numa_count", "LARGE_NUMA_POINT", "MAX_HINTS"]

#: beyond this many NUMA nodes only masks of the minimal size and one more are
#: walked; 2^64 masks on a 64-node box would never finish (upstream main bounds
#: the walk the same way).
LARGE_NUMA_POINT = 8
MAX_HINTS = 4096


def min_numa_count(idx: TopoIndex, reserved: CPUSet, need: int) -> int:
    caps = sorted(idx.allocatable_per_numa(reserved).values(), reverse=True)
    acc = 0
    for k, c in enumerate(caps, start=1):
        acc += c
        if acc >= need:
            return k
    raise invalid(
        "too_many_cpus",
        f"request of {need} cpus exceeds the {acc} allocatable cpus of this machine",
    )


def calculate_hints(
    idx: TopoIndex,
    ms: dict[int, NUMAState],
    reserved: CPUSet,
    need: int,
    exclusive: bool,
) -> list[TopologyHint]:
    if need <= 0:
        raise invalid("bad_quantity", "dedicated_cores needs a request of at least 1 cpu")
    min_numas = min_numa_count(idx, reserved, need)
    if not exclusive and min_numas > 1:
        largest = max(idx.allocatable_per_numa(reserved).values())
        raise invalid(
            "too_many_cpus",
            f"non-exclusive numa_binding request of {need} cpus does not fit one NUMA node "
            f"(largest has {largest} allocatable cpus); use numa_exclusive or request less",
        )
    res = frozenset(reserved)
    free = {n: len(frozenset(ms[n].default_cpuset) - res) for n in idx.numa_ids}
    socket_of_numa = {n: idx.socket_of[min(idx.numa_cpus[n])] for n in idx.numa_ids}
    ids = idx.numa_ids
    max_size = 1 if not exclusive else len(ids)
    if len(ids) > LARGE_NUMA_POINT:
        max_size = min(max_size, min_numas + 1)
    hints: list[TopologyHint] = []
    for size in range(min_numas, max_size + 1):
        for mask in combinations(ids, size):
            if exclusive and any(ms[n].allocated_cpuset for n in mask):
                continue
            if sum(free[n] for n in mask) < need:
                continue
            if size <= idx.numas_per_socket and len({socket_of_numa[n] for n in mask}) > 1:
                continue
            hints.append(TopologyHint(frozenset(mask), size == min_numas))
            if len(hints) >= MAX_HINTS:
                return hints
    if not hints:
        raise PolicyError(
            RESOURCE_EXHAUSTED,
            "no_hints",
            f"no NUMA node combination has {need} free cpus"
            + (" without other dedicated containers" if exclusive else ""),
        )
    return hints
