"""Pool sizing and entry refresh (upstream adjustAllocationEntries without an
advisor): shared pools sized from the requests of their members, reclaim takes
the rest (at least ``reclaim_min``), and every shared/reclaimed container is
pointed at its pool's cpuset.

Dedicated containers without numa_binding are refused at admission, so the
upstream "isolation"/"fallback" branches have nothing to place and are absent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from agent.cpu.calculator import TopoIndex, take_by_numa_balance
from agent.cpu.errors import PolicyError, RESOURCE_EXHAUSTED
from agent.cpu.qos import RECLAIM_POOL, RECLAIMED, RESERVE_POOL, SHARED, SYSTEM
from agent.cpu.state import AllocationInfo, PolicyState
from agent.cpuset import CPUSet

__all__ = ["PoolOptions", "bound_numas", "shared_available", "adjust", "init_pools", "sync_sidecars"]


@dataclass(frozen=True)
class PoolOptions:
    reclaim_min: int = 4
    #: upstream dynamic-config EnableReclaim (default false): when false, idle
    #: CPUs beyond reclaim_min are handed to the shared pools
    enable_reclaim: bool = False


def bound_numas(idx: TopoIndex, st: PolicyState) -> frozenset[int]:
    """NUMA nodes hosting a dedicated numa_binding container (quirk 14.4: such a
    node leaves the shared pools entirely)."""
    out: set[int] = set()
    for a in st.containers():
        if a.is_dedicated_binding and not a.is_sidecar:
            out.update(idx.numa_of[i] for i in a.cpuset)
    return frozenset(out)


def shared_available(idx: TopoIndex, st: PolicyState, reserved: CPUSet) -> CPUSet:
    """CPUs shared pools and ramp-up containers may use."""
    avail = set(idx.all) - set(reserved)
    for n in bound_numas(idx, st):
        avail -= idx.numa_cpus[n]
    return CPUSet(avail)


def _pool_quantities(st: PolicyState) -> dict[str, int]:
    sums: dict[str, float] = {}
    for a in st.containers():
        if a.qos_level == SHARED and not a.ramp_up and a.owner_pool_name and not a.is_sidecar:
            sums[a.owner_pool_name] = sums.get(a.owner_pool_name, 0.0) + a.request_quantity
    # a referenced pool never drops to 0 CPUs: an empty cpuset cannot be written
    return {p: max(1, math.ceil(round(q, 6))) for p, q in sums.items()}


def _sizes(quant: dict[str, int], avail: int, opts: PoolOptions) -> dict[str, int] | None:
    """Pool sizes; None means "more pools than CPUs: every pool gets all"."""
    if not quant:
        return {}
    total = sum(quant.values())
    if len(quant) > avail:
        return None
    if total <= avail:
        sizes = dict(quant)
    else:
        sizes = {p: max(1, math.ceil(avail * q / total)) for p, q in quant.items()}
        while sum(sizes.values()) > avail:
            p = max(sorted(sizes), key=lambda k: sizes[k])
            sizes[p] -= 1
    if not opts.enable_reclaim:
        extra = avail - sum(sizes.values()) - opts.reclaim_min
        if extra > 0:
            qtot = sum(sizes.values())
            left = extra
            for p in sorted(sizes):
                add = min(left, max(1, (extra * sizes[p]) // qtot))
                sizes[p] += add
                left -= add
    return sizes


def _reclaim(idx: TopoIndex, leftover: CPUSet, avail: CPUSet, reserved: CPUSet, opts: PoolOptions) -> CPUSet:
    if len(leftover) >= opts.reclaim_min:
        return leftover
    need = opts.reclaim_min - len(leftover)
    # top up from CPUs pools hold (overlap), else from anything but reserve
    for source in (avail - leftover, CPUSet(idx.all) - reserved - leftover):
        if source:
            took, _ = take_by_numa_balance(idx, source, min(need, len(source)))
            return leftover | took
    return leftover


def init_pools(idx: TopoIndex, st: PolicyState, reserved: CPUSet, opts: PoolOptions) -> PolicyState:
    """Start-up: reserve = reserved CPUs (always rewritten); reclaim created when
    absent; pools referenced by no container dropped."""
    pools = {RESERVE_POOL: reserved}
    used = {a.owner_pool_name for a in st.containers()}
    for name, cpus in st.pools.items():
        if name in (RESERVE_POOL, RECLAIM_POOL) or name in used:
            if name != RESERVE_POOL:
                pools[name] = cpus
    if not pools.get(RECLAIM_POOL):
        avail = shared_available(idx, st, reserved)
        for name, cpus in pools.items():
            if name not in (RESERVE_POOL, RECLAIM_POOL):
                avail = avail - cpus
        pools[RECLAIM_POOL] = _reclaim(idx, CPUSet(), avail, reserved, opts)
    return replace(st, pools=pools)


def _target_cpuset(a: AllocationInfo, pools: dict[str, CPUSet], ramp: CPUSet, all_cpus: CPUSet) -> AllocationInfo:
    if a.qos_level == SYSTEM:
        return a if a.cpuset == all_cpus else a.evolve(cpuset=all_cpus)
    if a.qos_level not in (SHARED, RECLAIMED) or a.is_sidecar:
        return a
    if a.ramp_up:
        return a if (a.cpuset == ramp and a.owner_pool_name == "") else a.evolve(cpuset=ramp, owner_pool_name="")
    cpus = pools.get(a.owner_pool_name)
    if cpus is None or cpus == a.cpuset:
        return a
    return a.evolve(cpuset=cpus)


def adjust(idx: TopoIndex, st: PolicyState, reserved: CPUSet, opts: PoolOptions) -> PolicyState:
    """Recompute every pool and every shared/reclaimed container's cpuset."""
    avail = shared_available(idx, st, reserved)
    quant = _pool_quantities(st)
    has_shared = any(a.qos_level == SHARED and not a.is_sidecar for a in st.containers())
    if not avail and has_shared:
        raise PolicyError(
            RESOURCE_EXHAUSTED,
            "no_shared_cpus",
            "this placement would leave no cpu for the shared_cores containers",
        )
    sizes = _sizes(quant, len(avail), opts)
    pools: dict[str, CPUSet] = {RESERVE_POOL: reserved}
    remaining = avail
    if sizes is None:
        for p in quant:
            pools[p] = avail
        remaining = CPUSet()
    else:
        for p in sorted(sizes):
            took, remaining = take_by_numa_balance(idx, remaining, sizes[p])
            pools[p] = took
    pools[RECLAIM_POOL] = _reclaim(idx, remaining, avail, reserved, opts)
    all_cpus = CPUSet(idx.all)
    entries = {}
    for uid, pod in st.entries.items():
        new_pod = {c: _target_cpuset(a, pools, avail, all_cpus) for c, a in pod.items()}
        entries[uid] = new_pod
    return sync_sidecars(PolicyState(pools=pools, entries=entries))


def sync_sidecars(st: PolicyState) -> PolicyState:
    """Sidecars follow their pod's main container (cpuset and owner pool)."""
    changed = False
    entries = st.entries
    for uid, pod in st.entries.items():
        sidecars = [a for a in pod.values() if a.is_sidecar]
        if not sidecars:
            continue
        main = next((a for a in pod.values() if a.container_type == "MAIN"), None)
        if main is None:
            continue
        for s in sidecars:
            if s.cpuset != main.cpuset or s.owner_pool_name != main.owner_pool_name:
                if not changed:
                    entries = {k: dict(v) for k, v in st.entries.items()}
                    changed = True
                entries[uid][s.container_name] = s.evolve(cpuset=main.cpuset, owner_pool_name=main.owner_pool_name)
    return replace(st, entries=entries) if changed else st

