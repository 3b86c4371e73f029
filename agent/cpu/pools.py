"""Pool sizing and entry refresh (upstream adjustAllocationEntries without an
advisor): shared pools sized from the requests of their members, reclaim takes
the rest (at least ``reclaim_min``), and every shared/reclaimed container is
pointed at its pool's cpuset, by reference (``state.PolicyState``: the members
resolve to the last re-size's targets when read, sidecars to their main's).

Dedicated containers without numa_binding are refused at admission, so the
upstream "isolation"/"fallback" branches have nothing to place and are absent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from agent.cpu.calculator import TopoIndex, take_by_numa_balance_from, take_by_topology
from agent.cpu.errors import PolicyError, RESOURCE_EXHAUSTED
from agent.cpu.qos import DEFAULT_POOL, RECLAIM_POOL, RECLAIMED, RESERVE_POOL, SHARED
from agent.cpu.state import Basis, Key, PMap, PolicyState, StateIndex
from agent.cpuset import CPUSet

__all__ = [
    "DEDICATED_NUMA_MODES",
    "DedicatedNuma",
    "PoolOptions",
    "bound_numas",
    "shared_available",
    "shared_bounds",
    "why_no_shared",
    "no_reclaim_cpus",
    "adjust",
    "init_pools",
]

#: what a NUMA-bound dedicated container takes out of the shared pools
DedicatedNuma = Literal["exclusive-cores", "whole-node"]
#: ``exclusive-cores``: its own CPUs only (the kubelet static CPU manager's,
#: Slurm's and Nomad's rule: a pinned job runs beside services on a one-node
#: box); ``whole-node``: its whole NUMA node (Katalyst's rule, quirk 14.4)
DEDICATED_NUMA_MODES: tuple[DedicatedNuma, ...] = ("exclusive-cores", "whole-node")


@dataclass(frozen=True)
class PoolOptions:
    reclaim_min: int = 4
    #: upstream dynamic-config EnableReclaim (default false): when false, idle
    #: CPUs beyond reclaim_min are handed to the shared pools
    enable_reclaim: bool = False
    #: Katalyst's rule by default: the upstream pool expectations depend on it
    dedicated_numa: DedicatedNuma = "whole-node"
    #: the advisor's size for the default shared pool (agent/advisor): at least this
    #: many CPUs when the pool exists, within what the other pools leave; None: from requests
    shared_size: int | None = None
    #: the advisor sizes the pools (set by its first re-size): idle CPUs stay in the reclaim
    #: pool as with ``enable_reclaim`` (not handed to the shared pools, which the advisor
    #: grows when their delay says so); the ``reclaim_min`` overlap is kept (cpu.idle and the
    #: advisor's quota protect the shared pods on the CPUs both pools hold)
    advised: bool = False
    #: the advisor's placement of the default shared pool (agent/advisor/placement.py): the pool
    #: is carved out of these CPUs first (those still available), topped up or trimmed to its
    #: size by the policy's own rule; None: round-robin over the NUMA nodes like every pool
    shared_cpus: CPUSet | None = None


def bound_numas(idx: TopoIndex, st: PolicyState) -> frozenset[int]:
    """NUMA nodes hosting a dedicated numa_binding container (quirk 14.4: such a
    node leaves the shared pools entirely)."""
    numa_of = idx.numa_of
    return frozenset(numa_of[i] for cpus in st.index().ded.values() for i in cpus)


def why_no_shared(mode: DedicatedNuma) -> str:
    """Why dedicated pods leave shared pods no CPU under ``mode``, for refusals: the
    rule is a setting, so the line names it (a reader of a whole-node refusal learns
    what to change)."""
    if mode == "whole-node":
        return 'under dedicated_numa = "whole-node" a NUMA node that holds a NUMA-bound dedicated pod ' \
               "leaves the shared pools"
    return "the cpus of NUMA-bound dedicated pods leave the shared pools, and shared pods need at least one"


def shared_available(idx: TopoIndex, st: PolicyState, reserved: CPUSet,
                     mode: DedicatedNuma = "whole-node") -> CPUSet:
    """CPUs shared pools and ramp-up containers may use: neither reserved nor
    dedicated, and under ``whole-node`` on no NUMA node a dedicated container
    is bound to (memoised per set of dedicated containers: hints, Allocate and
    re-sizing all ask)."""

    def compute() -> CPUSet:
        avail = set(idx.all) - set(reserved)
        if mode == "whole-node":
            for n in bound_numas(idx, st):
                avail -= idx.numa_cpus[n]
        else:
            for cpus in st.index().ded.values():
                avail -= set(cpus)
        return CPUSet(avail)

    return st.index().memo_by_ded(("shared_available", idx, reserved, mode), compute)


def no_reclaim_cpus(what: str) -> PolicyError:
    """The refusal when the reclaim pool is empty under exclusive-cores: dedicated pods hold every
    unreserved CPU (``_reclaim``); ``what``: what could not be done."""
    return PolicyError(RESOURCE_EXHAUSTED, "no_reclaim_cpus",
                       f"{what}: dedicated pods hold every unreserved cpu, and under dedicated_numa = "
                       '"exclusive-cores" reclaimed pods never share a dedicated cpu; stop a dedicated pod first')


def _pool_quantities(st: PolicyState) -> dict[str, int]:
    """Whole CPUs each referenced shared pool asks for, from the index's exact
    sums (``float`` of the exact sum is ``math.fsum`` of the members: the same
    whatever the order members joined in, and no pass over them)."""
    # a referenced pool never drops to 0 CPUs: an empty cpuset cannot be written
    return {p: max(1, math.ceil(round(float(q), 6))) for p, q in st.index().qty_sum.items()}


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
    if not opts.enable_reclaim and not opts.advised:
        extra = avail - sum(sizes.values()) - opts.reclaim_min
        if extra > 0:
            qtot = sum(sizes.values())
            left = extra
            for p in sorted(sizes):
                add = min(left, max(1, (extra * sizes[p]) // qtot))
                sizes[p] += add
                left -= add
    if opts.shared_size is not None and DEFAULT_POOL in sizes:
        room = avail - sum(v for p, v in sizes.items() if p != DEFAULT_POOL)
        sizes[DEFAULT_POOL] = max(sizes[DEFAULT_POOL], min(opts.shared_size, room))
    return sizes


def shared_bounds(idx: TopoIndex, st: PolicyState, reserved: CPUSet, opts: PoolOptions) -> tuple[int, int]:
    """(fewest, most) CPUs the default shared pool may have now: its requests' size as
    the policy would set it without the advisor, and what neither the reserve, dedicated
    pods nor the other shared pools hold. (0, 0) when no shared pod is in the pool."""
    quant = _pool_quantities(st)
    if DEFAULT_POOL not in quant:
        return 0, 0
    avail = len(shared_available(idx, st, reserved, opts.dedicated_numa))
    sizes = _sizes(quant, avail, replace(opts, shared_size=None))
    if sizes is None:
        return avail, avail
    room = avail - sum(v for p, v in sizes.items() if p != DEFAULT_POOL)
    return sizes[DEFAULT_POOL], room


def _reclaim(idx: TopoIndex, leftover: CPUSet, avail: CPUSet, reserved: CPUSet, opts: PoolOptions) -> CPUSet:
    if len(leftover) >= opts.reclaim_min:
        return leftover
    need = opts.reclaim_min - len(leftover)
    left = set(leftover)
    if opts.dedicated_numa == "exclusive-cores":
        # never a dedicated CPU (upstream's fallback below takes any unreserved one, so a
        # reclaimed pod shared a pinned job's core): top up from the shared CPUs only. When
        # dedicated pods hold every unreserved CPU the pool is empty and what would need it
        # is refused, as for shared pods (docs/cpu-policy.md, "The reclaim pool")
        rest = set(avail) - left
        if rest:
            return CPUSet(left | take_by_numa_balance_from(idx, rest, min(need, len(rest))))
        return leftover
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
        avail = shared_available(idx, st, reserved, opts.dedicated_numa)
        for name, cpus in pools.items():
            if name not in (RESERVE_POOL, RECLAIM_POOL):
                avail = avail - cpus
        pools[RECLAIM_POOL] = _reclaim(idx, CPUSet(), avail, reserved, opts)
    return st.with_pools(pools)


def adjust(idx: TopoIndex, st: PolicyState, reserved: CPUSet, opts: PoolOptions) -> PolicyState:
    """Recompute every pool, and point every shared/reclaimed/system container
    at its target cpuset.

    Members are pointed by reference: the new targets become the index's basis,
    which every member resolves to when read (``PolicyState.resolve``), so a
    re-size costs the same with 10 members or 10,000 (issue 24)."""
    ix = st.index()
    avail = shared_available(idx, st, reserved, opts.dedicated_numa)
    quant = _pool_quantities(st)
    if not avail and ix.n_shared:
        raise PolicyError(
            RESOURCE_EXHAUSTED,
            "no_shared_cpus",
            f"this placement would leave no cpu for the shared_cores containers ({why_no_shared(opts.dedicated_numa)})",
        )
    sizes = _sizes(quant, len(avail), opts)
    pools: dict[str, CPUSet] = {RESERVE_POOL: reserved}
    if sizes is None:
        for p in sorted(quant):
            pools[p] = avail
        remaining = CPUSet()
    else:
        left = set(avail)
        if opts.shared_cpus is not None and DEFAULT_POOL in sizes:
            pools[DEFAULT_POOL] = _placed(idx, left, opts.shared_cpus, sizes[DEFAULT_POOL])
        for p in sorted(sizes):
            if p not in pools:
                pools[p] = CPUSet(take_by_numa_balance_from(idx, left, sizes[p]))
        remaining = CPUSet(left)
    pools[RECLAIM_POOL] = _reclaim(idx, remaining, avail, reserved, opts)
    if not pools[RECLAIM_POOL] and ix.qos_counts.get(RECLAIMED):
        raise no_reclaim_cpus("this placement would leave no cpu for the reclaimed_cores containers")
    return PolicyState(pools=pools, entries=st.stored).with_index(_rebased(st, ix, pools, avail, idx.all_cpuset))


def _placed(idx: TopoIndex, left: set[int], want: CPUSet, n: int) -> CPUSet:
    """The default shared pool where the advisor placed it: ``n`` CPUs out of ``left`` (which
    loses them), the placement's CPUs still in ``left`` first. A placement larger than ``n``
    is trimmed, a smaller one (requests grew, a dedicated pod took some of its CPUs) topped
    up, both packed by topology (whole cores, one L3) as the advisor would."""
    mine = CPUSet(set(want) & left)
    if len(mine) >= n:
        got = mine if len(mine) == n else take_by_topology(idx, mine, n)
    else:
        got = mine | take_by_topology(idx, CPUSet(left - set(mine)), n - len(mine))
    left -= set(got)
    return got


def _rebased(st: PolicyState, ix: StateIndex, pools: dict[str, CPUSet], ramp: CPUSet, all_cpus: CPUSet) -> StateIndex:
    """``ix`` with the re-size's targets as its basis: every member resolves to
    them from now on (no member is visited). A pool the re-size dropped keeps its
    earlier target for members that held it, and a member written since the last
    re-size keeps its own cpuset (it stays ``touched``), as it would have kept
    either had the re-size rewritten members one by one."""
    old = ix.basis
    targets = pools
    if old is not None:
        gone = {p: t for p, t in old.pools.items() if p not in pools}
        if gone:
            targets = {**gone, **pools}
    keep: dict[Key, None] = {}
    for key in ix.touched:
        a = st.stored[key[0]][key[1]]
        if a.qos_level in (SHARED, RECLAIMED) and not a.ramp_up and not a.is_sidecar \
                and a.owner_pool_name not in pools:
            keep[key] = None
    new_ix = ix.copy()
    new_ix.basis = Basis(pools=targets, ramp=ramp, all_cpus=all_cpus)
    new_ix.touched = PMap(keep)
    return new_ix
