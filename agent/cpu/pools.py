"""Pool sizing and entry refresh (upstream adjustAllocationEntries without an
advisor): shared pools sized from the requests of their members, reclaim takes
the rest (at least ``reclaim_min``), and every shared/reclaimed container is
pointed at its pool's cpuset.

Dedicated containers without numa_binding are refused at admission, so the
upstream "isolation"/"fallback" branches have nothing to place and are absent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from agent.cpu.calculator import TopoIndex, take_by_numa_balance_from
from agent.cpu.errors import PolicyError, RESOURCE_EXHAUSTED
from agent.cpu.qos import RECLAIM_POOL, RESERVE_POOL
from agent.cpu.state import Basis, PolicyState
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
    numa_of = idx.numa_of
    return frozenset(numa_of[i] for cpus in st.index().ded.values() for i in cpus)


def shared_available(idx: TopoIndex, st: PolicyState, reserved: CPUSet) -> CPUSet:
    """CPUs shared pools and ramp-up containers may use (memoised per set of
    dedicated containers: hints, Allocate and re-sizing all ask)."""

    def compute() -> CPUSet:
        avail = set(idx.all) - set(reserved)
        for n in bound_numas(idx, st):
            avail -= idx.numa_cpus[n]
        return CPUSet(avail)

    return st.index().memo_by_ded(("shared_available", idx, reserved), compute)


def _pool_quantities(st: PolicyState) -> dict[str, int]:
    """Whole CPUs each referenced shared pool asks for. ``math.fsum`` is exact
    whatever the order members joined in (a running sum would depend on it)."""
    # a referenced pool never drops to 0 CPUs: an empty cpuset cannot be written
    return {p: max(1, math.ceil(round(math.fsum(q.values()), 6))) for p, q in st.index().qty.items()}


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
    left = set(leftover)
    # top up from CPUs pools hold (overlap), else from anything but reserve
    for source in (lambda: set(avail) - left, lambda: set(idx.all) - set(reserved) - left):
        cpus = source()
        if cpus:
            return CPUSet(left | take_by_numa_balance_from(idx, cpus, min(need, len(cpus))))
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


def adjust(idx: TopoIndex, st: PolicyState, reserved: CPUSet, opts: PoolOptions) -> PolicyState:
    """Recompute every pool, and point every shared/reclaimed/system container
    at its target cpuset.

    Only followers that may differ from their target are visited: those of a
    pool (or the ramp-up set) whose cpuset moved since the last adjustment,
    and those added or changed since (``StateIndex.touched``). The others
    already hold the last adjustment's value, which is still the target."""
    ix = st.index()
    avail = shared_available(idx, st, reserved)
    quant = _pool_quantities(st)
    if not avail and ix.n_shared:
        raise PolicyError(
            RESOURCE_EXHAUSTED,
            "no_shared_cpus",
            "this placement would leave no cpu for the shared_cores containers",
        )
    sizes = _sizes(quant, len(avail), opts)
    pools: dict[str, CPUSet] = {RESERVE_POOL: reserved}
    if sizes is None:
        for p in sorted(quant):
            pools[p] = avail
        remaining = CPUSet()
    else:
        left = set(avail)
        for p in sorted(sizes):
            pools[p] = CPUSet(take_by_numa_balance_from(idx, left, sizes[p]))
        remaining = CPUSet(left)
    pools[RECLAIM_POOL] = _reclaim(idx, remaining, avail, reserved, opts)
    all_cpus = idx.all_cpuset
    basis = ix.basis
    touched = ix.touched
    entries = dict(st.entries)
    fresh: set[str] = set()  # pods whose dict is already this state's own copy

    def repoint(members: dict[tuple[str, str], None], old: CPUSet | None, target: CPUSet, ramp: bool) -> None:
        if basis is not None and old is not None and old == target:
            keys: Iterable[tuple[str, str]] = _among(touched, members)  # the pool did not move
            stale = False
        else:
            keys = members
            # untouched members hold the basis value, so they differ from target
            stale = basis is not None and old is not None
        for key in keys:
            uid, c = key
            pod = entries[uid]
            a = pod[c]
            if not stale or key in touched:
                cs = a.cpuset
                if (cs is target or cs == target) and (not ramp or a.owner_pool_name == ""):
                    continue
            if uid not in fresh:
                pod = entries[uid] = dict(pod)
                fresh.add(uid)
            pod[c] = a.evolve(cpuset=target, owner_pool_name="") if ramp else a.with_cpuset(target)

    for name, members in ix.follow.items():
        target = pools.get(name)
        if target is not None:
            repoint(members, basis.pools.get(name) if basis is not None else None, target, False)
    repoint(ix.ramp, basis.ramp if basis is not None else None, avail, True)
    repoint(ix.system, basis.all_cpus if basis is not None else None, all_cpus, False)
    new_ix = ix.copy()
    new_ix.basis = Basis(pools=pools, ramp=avail, all_cpus=all_cpus)
    new_ix.touched = {}
    return sync_sidecars(PolicyState(pools=pools, entries=entries).with_index(new_ix))


def _among(touched: dict[tuple[str, str], None], members: dict[tuple[str, str], None]) -> list[tuple[str, str]]:
    if len(touched) < len(members):
        return [k for k in touched if k in members]
    return [k for k in members if k in touched]


def sync_sidecars(st: PolicyState) -> PolicyState:
    """Sidecars follow their pod's main container (cpuset and owner pool)."""
    ix = st.index()
    if not ix.sidecar_pods:
        return st
    changed = False
    entries = st.entries
    for uid in ix.sidecar_pods:
        pod = st.entries[uid]
        main = next((a for a in pod.values() if a.container_type == "MAIN"), None)
        if main is None:
            continue
        for s in pod.values():
            if not s.is_sidecar:
                continue
            if s.cpuset != main.cpuset or s.owner_pool_name != main.owner_pool_name:
                if not changed:
                    entries = dict(st.entries)
                    changed = True
                if entries[uid] is pod:
                    entries[uid] = dict(pod)
                entries[uid][s.container_name] = s.evolve(cpuset=main.cpuset, owner_pool_name=main.owner_pool_name)
    # sidecars are in no pool, ramp-up or dedicated set: the index still holds
    return PolicyState(pools=st.pools, entries=entries).with_index(ix) if changed else st
