"""NUMA nodes grouped by distance: what a 64-node matrix says in a few lines.

The kernel's distance table (ACPI SLIT) is a matrix nobody reads beyond 8
nodes. What an operator wants from it is the hierarchy it implies: which nodes
are in one socket, which sockets share a board or a switch. Taking every
distinct remote distance as a threshold and joining nodes at most that far
apart gives exactly that hierarchy, one level per threshold that changes the
grouping; pure function of the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.cpuset import CPUSet
from agent.topology.model import Topology

__all__ = ["DistanceLevel", "distance_levels"]


@dataclass(frozen=True)
class DistanceLevel:
    """Nodes joined when every hop in a chain is at most ``distance`` apart."""

    distance: int
    groups: tuple[CPUSet, ...]  # node ids, ordered by their first node


def _components(ids: list[int], near: dict[int, set[int]]) -> tuple[CPUSet, ...]:
    seen: set[int] = set()
    out: list[CPUSet] = []
    for start in ids:
        if start in seen:
            continue
        todo, comp = [start], set()
        while todo:
            n = todo.pop()
            if n in comp:
                continue
            comp.add(n)
            todo.extend(near[n] - comp)
        seen |= comp
        out.append(CPUSet(comp))
    return tuple(sorted(out, key=CPUSet.first))


def distance_levels(topo: Topology) -> tuple[DistanceLevel, ...]:
    """One level per remote distance that merges groups, nearest first.

    The last level is dropped when it is the whole machine in one group (that
    says nothing); a machine without distances, or with one node, has none.
    Distances are taken both ways (a table with a < b and b > a is asymmetric:
    the larger counts, so two nodes join only when both directions allow it).
    """
    ids = list(topo.numa_ids)
    if len(ids) < 2:
        return ()
    pair: dict[tuple[int, int], int] = {}
    for a in ids:
        for b in ids:
            if a < b:
                d1, d2 = topo.distance(a, b), topo.distance(b, a)
                if d1 is None or d2 is None:
                    continue
                pair[(a, b)] = max(d1, d2)
    if not pair:
        return ()
    levels: list[DistanceLevel] = []
    previous = len(ids)
    for threshold in sorted(set(pair.values())):
        near: dict[int, set[int]] = {n: set() for n in ids}
        for (a, b), d in pair.items():
            if d <= threshold:
                near[a].add(b)
                near[b].add(a)
        groups = _components(ids, near)
        if len(groups) < previous and len(groups) > 1:
            levels.append(DistanceLevel(threshold, groups))
        previous = len(groups)
        if len(groups) == 1:
            break
    return tuple(levels)
