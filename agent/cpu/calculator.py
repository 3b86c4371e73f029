"""CPU selection: TakeByTopology, TakeByNUMABalance, TakeHTByNUMABalance.

Pure functions over a ``TopoIndex`` (a precomputed view of a ``Topology``) and
``CPUSet`` inputs. Tie-breaking follows upstream exactly (lowest ids, NUMA
round-robin from the lowest node) because every expected cpuset in the upstream
tests depends on it. Internally plain ``set[int]`` is used: building a CPUSet per
step would dominate the cost on 256-CPU machines.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.cpu.errors import PolicyError, RESOURCE_EXHAUSTED, invalid
from agent.cpuset import CPUSet
from agent.topology.model import Topology

__all__ = ["TopoIndex", "take_by_topology", "take_by_numa_balance", "take_by_numa_balance_from", "take_ht_by_numa_balance"]


@dataclass(frozen=True)
class _Core:
    cpus: frozenset[int]
    first: int
    numa: int
    socket: int
    llc: int


class TopoIndex:
    """Lookup tables the calculator and policy need, built once per topology."""

    def __init__(self, topo: Topology) -> None:
        self.topology = topo
        self.all = frozenset(c.id for c in topo.cpus)
        self.all_cpuset = CPUSet(self.all)
        numa_of: dict[int, int] = {}
        for c in topo.cpus:
            numa_of[c.id] = c.numa_node if c.numa_node is not None else 0
        self.numa_of = numa_of
        self.numa_ids: tuple[int, ...] = tuple(sorted(set(numa_of.values())))
        self.numa_cpus: dict[int, frozenset[int]] = {
            n: frozenset(i for i, m in numa_of.items() if m == n) for n in self.numa_ids
        }
        self.socket_of = {c.id: c.package_id for c in topo.cpus}
        self.socket_ids = tuple(sorted(set(self.socket_of.values())))
        self.socket_cpus = {s: frozenset(i for i, p in self.socket_of.items() if p == s) for s in self.socket_ids}
        self.socket_numas: dict[int, frozenset[int]] = {
            s: frozenset(numa_of[i] for i in cpus) for s, cpus in self.socket_cpus.items()
        }
        llcs = topo.last_level_caches
        llc_of: dict[int, int] = {}
        self.llc_cpus: list[frozenset[int]] = []
        for idx, cache in enumerate(llcs):
            members = frozenset(cache.cpus) & self.all
            self.llc_cpus.append(members)
            for i in members:
                llc_of.setdefault(i, idx)
        for i in sorted(self.all):  # CPUs no cache lists (odd fixtures): one group each
            if i not in llc_of:
                llc_of[i] = len(self.llc_cpus)
                self.llc_cpus.append(frozenset([i]))
        self.llc_of = llc_of
        cores = []
        for k in topo.cores:
            cpus = frozenset(k.cpus) & self.all
            first = min(cpus)
            cores.append(_Core(cpus, first, numa_of[first], self.socket_of[first], llc_of[first]))
        self.cores: tuple[_Core, ...] = tuple(sorted(cores, key=lambda k: k.first))
        self.core_of: dict[int, _Core] = {i: k for k in self.cores for i in k.cpus}
        self.cpus_per_core = max((len(k.cpus) for k in self.cores), default=1)
        self.numa_cores: dict[int, tuple[_Core, ...]] = {
            n: tuple(k for k in self.cores if k.numa == n) for n in self.numa_ids
        }
        self.numas_per_socket = max((len(v) for v in self.socket_numas.values()), default=1)
        self.numa_cpusets: dict[int, CPUSet] = {n: CPUSet(c) for n, c in self.numa_cpus.items()}
        self._allocatable: dict[CPUSet, dict[int, int]] = {}

    def allocatable_per_numa(self, reserved: CPUSet) -> dict[int, int]:
        """CPUs per NUMA node outside ``reserved`` (asked on every hint)."""
        got = self._allocatable.get(reserved)
        if got is None:
            res = frozenset(reserved)
            got = self._allocatable[reserved] = {n: len(self.numa_cpus[n] - res) for n in self.numa_ids}
        return got

    def assignments(self, cpus: CPUSet | frozenset[int]) -> dict[int, CPUSet]:
        """Per-NUMA slices of a cpuset (only NUMAs it touches)."""
        out: dict[int, set[int]] = {}
        for i in cpus:
            out.setdefault(self.numa_of.get(i, 0), set()).add(i)
        return {n: CPUSet(v) for n, v in sorted(out.items())}


def _check(avail: CPUSet | frozenset[int] | set[int], n: int) -> None:
    if n < 0:
        raise invalid("bad_quantity", f"cannot take a negative number of cpus ({n})")
    if n > len(avail):
        raise PolicyError(RESOURCE_EXHAUSTED, "insufficient_cpus", f"need {n} cpus, only {len(avail)} available")


class _Take:
    """One take_by_topology in progress: what is still free, what is taken, how many are still needed."""

    def __init__(self, avail: CPUSet, n: int) -> None:
        self.free = set(avail)
        self.taken: set[int] = set()
        self.need = n

    def count(self, group: frozenset[int]) -> int:
        return len(group & self.free)

    def grab(self, cpus: frozenset[int]) -> None:
        self.taken |= cpus
        self.free -= cpus
        self.need -= len(cpus)


def take_by_topology(idx: TopoIndex, avail: CPUSet, n: int, align_l3: bool = True) -> CPUSet:
    """Pack n CPUs: whole free sockets, then (L3-aware) whole free last-level
    caches, then whole free cores, then single threads of the most used cores.

    With ``align_l3`` the remainder goes into the fullest-fitting single LLC when
    one can hold it, so a container does not straddle two L3s (CCXs) needlessly.
    """
    _check(avail, n)
    if n == 0:
        return CPUSet()
    t = _Take(avail, n)
    # 1. whole sockets, fewest available first
    for s in sorted(idx.socket_ids, key=lambda s: (t.count(idx.socket_cpus[s]), s)):
        cpus = idx.socket_cpus[s]
        if len(cpus) <= t.need and cpus <= t.free:
            t.grab(cpus)
    if t.need == 0:
        return CPUSet(t.taken)
    scope = t.free
    if align_l3:
        _take_whole_llcs(idx, t)
        if t.need == 0:
            return CPUSet(t.taken)
        scope = _best_fit_llc(idx, t)
    if _take_cores_then_threads(idx, t, scope):
        return CPUSet(t.taken)
    # scope was an LLC that ran dry (cannot happen: it held >= need) or non-L3 path
    for i in sorted(t.free):
        t.taken.add(i)
        t.need -= 1
        if t.need == 0:
            return CPUSet(t.taken)
    raise PolicyError(RESOURCE_EXHAUSTED, "insufficient_cpus", f"could not take {n} cpus from {avail}")


def _take_whole_llcs(idx: TopoIndex, t: _Take) -> None:
    """2. whole last-level caches (of more than one CPU), fewest available first."""
    order = sorted(range(len(idx.llc_cpus)), key=lambda i: (t.count(idx.llc_cpus[i]), i))
    for i in order:
        cpus = idx.llc_cpus[i]
        if len(cpus) <= t.need and cpus <= t.free and len(cpus) > 1:
            t.grab(cpus)


def _best_fit_llc(idx: TopoIndex, t: _Take) -> set[int]:
    """Where the remainder goes: the free CPUs of the fullest LLC that still holds it, else all free CPUs."""
    fits = [i for i in range(len(idx.llc_cpus)) if t.count(idx.llc_cpus[i]) >= t.need]
    if not fits:
        return t.free
    best = min(fits, key=lambda i: (t.count(idx.llc_cpus[i]), i))
    return t.free & idx.llc_cpus[best]


def _take_cores_then_threads(idx: TopoIndex, t: _Take, scope: set[int]) -> bool:
    """3. whole free cores within scope, then 4. single threads, partially used cores first.
    True once the need is met."""
    sock_rank = {s: r for r, s in enumerate(sorted(idx.socket_ids, key=lambda s: (t.count(idx.socket_cpus[s]), s)))}
    cores = [k for k in idx.cores if k.cpus & scope]
    cores.sort(key=lambda k: (sock_rank[k.socket], len(k.cpus & scope), k.first))
    for k in cores:
        if t.need >= len(k.cpus) and k.cpus <= scope:
            scope = scope - k.cpus
            t.grab(k.cpus)
            if t.need == 0:
                return True
    cores.sort(key=lambda k: (sock_rank[k.socket], len(k.cpus & scope), k.first))
    for k in cores:
        for i in sorted(k.cpus & scope):
            t.taken.add(i)
            t.free.discard(i)
            t.need -= 1
            if t.need == 0:
                return True
    return False


def take_by_numa_balance(idx: TopoIndex, avail: CPUSet, n: int) -> tuple[CPUSet, CPUSet]:
    """Spread n CPUs round-robin over NUMA nodes, whole cores while the need is
    at least a core. Returns (taken, avail - taken).

    Upstream returns the *input* set on failure (quirk); here failure raises and
    nothing is returned.
    """
    free = set(avail)
    taken = take_by_numa_balance_from(idx, free, n)
    return CPUSet(taken), CPUSet(free)


def take_by_numa_balance_from(idx: TopoIndex, free: set[int], n: int) -> set[int]:
    """``take_by_numa_balance`` on a plain set, which loses what is taken (and
    is left unchanged on failure): pool sizing carves several pools out of one
    set without building a CPUSet per step."""
    _check(free, n)
    start = frozenset(free)
    taken: set[int] = set()
    need = n
    cpc = idx.cpus_per_core

    def free_core(numa: int) -> _Core | None:
        for k in idx.numa_cores[numa]:
            if k.cpus <= free:
                return k
        return None

    while need > 0:
        progressed = False
        any_free_core = cpc > 1 and any(k.cpus <= free for k in idx.cores) if need >= cpc else False
        for numa in idx.numa_ids:
            if need == 0:
                break
            if need >= cpc and any_free_core:
                k = free_core(numa)
                if k is None:
                    continue
                taken |= k.cpus
                free -= k.cpus
                need -= len(k.cpus)
                progressed = True
            else:
                in_numa = idx.numa_cpus[numa] & free
                if not in_numa:
                    continue
                i = min(in_numa)
                taken.add(i)
                free.discard(i)
                need -= 1
                progressed = True
        if not progressed:
            free |= start
            raise PolicyError(
                RESOURCE_EXHAUSTED, "insufficient_cpus", f"could not take {n} cpus from {CPUSet(start)}"
            )
    return taken


def take_ht_by_numa_balance(idx: TopoIndex, avail: CPUSet, n: int) -> CPUSet:
    """One logical CPU (lowest free) per NUMA node per round; used for reserved CPUs."""
    _check(avail, n)
    free = set(avail)
    taken: set[int] = set()
    while len(taken) < n:
        for numa in idx.numa_ids:
            if len(taken) == n:
                break
            in_numa = idx.numa_cpus[numa] & free
            if in_numa:
                i = min(in_numa)
                taken.add(i)
                free.discard(i)
    return CPUSet(taken)
