"""Where the shared pool grows and shrinks on a multi-NUMA machine: pure.

The policy on its own carves every pool round-robin over the NUMA nodes
(``take_by_numa_balance_from``): right for sizing from requests, blind to where the
shared pods' memory and delay are. The advisor knows both, so when it changes the pool's
size it also says which CPUs: new CPUs come from the node where the shared pods are
under pressure (their run-queue wait, counted on the nodes of their ``cpuset.mems``,
where their memory lives), then from the nodes the pool already holds, so the pool stays
on as few nodes as fit, then from a node sharing an L3 with it; inside a node a sibling
of a pool CPU comes first (whole cores), then a CPU of a last-level cache the pool
already uses. CPUs go back from the node with
the least shared pressure (and, between equals, the fewest pool CPUs: the pool
consolidates), lone hyperthreads first, so whole cores stay whole.

Only CPUs of ``room`` (what the policy says the pool may hold: neither reserved,
dedicated nor another shared pool's) are ever chosen; the policy checks the choice again
(``DynamicPolicy.resize_shared``). No I/O: the component reads the inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.cpuset import CPUSet
from agent.topology.model import Topology

__all__ = ["Machine", "Placement", "place", "numa_pressure"]


@dataclass(frozen=True)
class Machine:
    """What placement needs of the topology: each CPU's NUMA node, core siblings and LLC."""

    numa_of: Mapping[int, int]
    siblings: Mapping[int, frozenset[int]]
    llc_of: Mapping[int, int]

    @classmethod
    def of(cls, topo: Topology) -> Machine:
        numa_of = {c.id: c.numa_node if c.numa_node is not None else 0 for c in topo.cpus}
        siblings: dict[int, frozenset[int]] = {}
        for k in topo.cores:
            for i in k.cpus:
                siblings[i] = frozenset(k.cpus)
        llc_of: dict[int, int] = {}
        for n, cache in enumerate(topo.last_level_caches):
            for i in cache.cpus:
                llc_of.setdefault(i, n)
        return cls(numa_of, siblings, llc_of)

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.numa_of.values())))


@dataclass(frozen=True)
class Placement:
    """The pool's CPUs after the change, what moved and why."""

    cpus: CPUSet
    add: CPUSet
    remove: CPUSet
    reason: str
    #: shared pressure per NUMA node the choice was made from (run-queue wait, s/s)
    pressure: Mapping[int, float]

    def per_node(self, m: Machine) -> dict[int, int]:
        out: dict[int, int] = {}
        for i in self.cpus:
            out[m.numa_of.get(i, 0)] = out.get(m.numa_of.get(i, 0), 0) + 1
        return dict(sorted(out.items()))

    def record(self, m: Machine) -> dict[str, Any]:
        """The decisions log's ``placement`` entry."""
        return {"cpus": str(self.cpus), "add": str(self.add), "remove": str(self.remove),
                "per_node": {str(n): c for n, c in self.per_node(m).items()},
                "pressure": {str(n): round(v, 4) for n, v in sorted(self.pressure.items())},
                "reason": self.reason}


def numa_pressure(m: Machine, pods: Iterable[tuple[float, CPUSet | None]]) -> dict[int, float]:
    """Shared pressure per NUMA node: each shared pod's run-queue wait (s/s) spread evenly
    over the nodes of its ``cpuset.mems`` (all nodes when unknown or empty)."""
    nodes = m.nodes
    out = {n: 0.0 for n in nodes}
    for wait, mems in pods:
        where = [n for n in nodes if mems and n in mems] or list(nodes)
        for n in where:
            out[n] += wait / len(where)
    return out


def _count(m: Machine, cpus: Iterable[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for i in cpus:
        out[m.numa_of.get(i, 0)] = out.get(m.numa_of.get(i, 0), 0) + 1
    return out


def place(m: Machine, current: CPUSet, room: CPUSet, size: int, pressure: Mapping[int, float]) -> Placement:
    """The pool's ``size`` CPUs, changing as few of ``current`` as it can: CPUs of ``current``
    outside ``room`` are dropped first (the policy would not keep them), then the pool grows or
    shrinks as the module says. ``size`` above ``len(room)`` takes all of ``room``."""
    keep = set(current) & set(room)
    dropped = set(current) - keep
    size = max(0, min(size, len(room)))
    if len(keep) < size:
        cpus, why = _grow(m, keep, set(room) - keep, size - len(keep), pressure)
    elif len(keep) > size:
        cpus, why = _shrink(m, keep, len(keep) - size, pressure)
    else:
        cpus, why = keep, "pool kept where it is"
    if dropped:
        why = f"{CPUSet(dropped)} no longer the pool's to hold; {why}"
    new = CPUSet(cpus)
    return Placement(new, new - current, current - new, why, dict(pressure))


def _grow(m: Machine, pool: set[int], free: set[int], need: int,
          pressure: Mapping[int, float]) -> tuple[set[int], str]:
    held = _count(m, pool)
    pool, free = set(pool), set(free)
    order: list[int] = []
    while need and free:
        now = _count(m, pool)
        avail = _count(m, free)
        llcs = _llc_count(m, pool)
        node_llcs = {n: {m.llc_of.get(i) for i in free if m.numa_of.get(i, 0) == n} for n in avail}
        # the pressured node first, then where the pool already is, then a node sharing an L3
        # with it, then the roomiest: one node filled before the next (as few nodes as fit)
        n = min(avail, key=lambda n: (-pressure.get(n, 0.0), -now.get(n, 0),
                                      -sum(llcs.get(c, 0) for c in node_llcs[n]), -avail[n], n))
        order.append(n)
        while need and (mine := {i for i in free if m.numa_of.get(i, 0) == n}):
            used = {m.llc_of.get(i) for i in pool}
            i = min(mine, key=lambda i: (not (m.siblings.get(i, frozenset()) & pool),
                                         m.llc_of.get(i) not in used,
                                         # a whole free core before a half-used one (keep cores whole)
                                         not (m.siblings.get(i, frozenset({i})) <= free | pool),
                                         i))
            pool.add(i)
            free.discard(i)
            need -= 1
    got = _count(m, pool)
    top = order[0] if order else None
    why = "grown on the NUMA node(s) " + ",".join(str(n) for n in order if got.get(n, 0) > held.get(n, 0))
    if top is not None and pressure.get(top, 0.0) > 0:
        why += f" (shared pressure highest on node {top}: {pressure[top]:.3f} s/s)"
    else:
        why += " (no node under more shared pressure: where the pool already is)"
    return pool, why


def _llc_count(m: Machine, cpus: Iterable[int]) -> dict[int | None, int]:
    out: dict[int | None, int] = {}
    for i in cpus:
        out[m.llc_of.get(i)] = out.get(m.llc_of.get(i), 0) + 1
    return out


def _shrink(m: Machine, pool: set[int], extra: int, pressure: Mapping[int, float]) -> tuple[set[int], str]:
    pool = set(pool)
    gave: dict[int, int] = {}
    while extra:
        held = _count(m, pool)
        n = min(held, key=lambda n: (pressure.get(n, 0.0), held[n], -n))
        mine = [i for i in pool if m.numa_of.get(i, 0) == n]
        llc_held = _llc_count(m, pool)
        # a lone thread (its siblings already gone) first, then the LLC the pool uses least
        i = min(mine, key=lambda i: (len(m.siblings.get(i, frozenset({i})) & pool), llc_held[m.llc_of.get(i)], -i))
        pool.discard(i)
        gave[n] = gave.get(n, 0) + 1
        extra -= 1
    nodes = ",".join(str(n) for n in sorted(gave))
    least = min(gave, key=lambda n: pressure.get(n, 0.0))
    return pool, (f"given back from NUMA node(s) {nodes} (least shared pressure: "
                  f"{pressure.get(least, 0.0):.3f} s/s on node {least})")
