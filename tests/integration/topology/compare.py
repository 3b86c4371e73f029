"""Compare hwagent's ``Topology`` with hwloc's reading of the same machine.

The comparison is by OS index and CPU sets only (never by hwloc's logical
numbering or object depth), restricted to what hwloc shows: the online CPUs
the reading process was allowed to use, and the allowed memory nodes.
Returns one line per aspect that differs, keyed by aspect name, so a test can
say exactly which differences are expected for a snapshot and why.
"""

from __future__ import annotations

from agent.cpuset import CPUSet
from agent.topology.model import NUMANode, Topology
from tests.integration.topology.hwloc_view import HwlocView

__all__ = ["ASPECTS", "compare"]

ASPECTS = ("pus", "packages", "cores", "cores_per_package", "numa_ids", "numa_cpus", "numa_memory", "pu_numa", "llc", "distances")


def _sets(sets: object) -> list[str]:
    return sorted((str(s) for s in sets), key=lambda t: (len(t), t))  # type: ignore[attr-defined]


def compare(topo: Topology, hw: HwlocView) -> dict[str, str]:
    diffs: dict[str, str] = {}
    visible = topo.online & topo.allowed_cpus if topo.allowed_cpus is not None else topo.online

    if visible != hw.pus:
        diffs["pus"] = f"hwagent {visible} vs hwloc {hw.pus}"
    _compare_packages_and_cores(topo, hw, visible, diffs)
    ours_nodes = _compare_nodes(topo, hw, visible, diffs)

    ours_llc = {c.cpus & visible for c in topo.last_level_caches} - {CPUSet()}
    theirs_llc = hw.last_level_caches() - {CPUSet()}
    if ours_llc != theirs_llc:
        diffs["llc"] = f"hwagent {_sets(ours_llc)[:6]} vs hwloc {_sets(theirs_llc)[:6]}"

    bad_dist = []
    for (a, b), v in sorted(hw.distances.items()):
        if a in ours_nodes and b in ours_nodes and topo.distance(a, b) != v:
            bad_dist.append(f"{a}->{b}: {topo.distance(a, b)} vs {v}")
    if bad_dist:
        diffs["distances"] = f"{len(bad_dist)} pairs, e.g. " + "; ".join(bad_dist[:4])
    return diffs


def _compare_packages_and_cores(topo: Topology, hw: HwlocView, visible: CPUSet, diffs: dict[str, str]) -> None:

    # Objects left without any allowed CPU are not comparable: hwloc keeps a
    # package or cache whose memory node is still allowed, hwagent's view of
    # the allowed part has nothing there. Both sides drop them.
    ours_pk = {topo.cpus_of_package(p) & visible for p in topo.package_ids} - {CPUSet()}
    theirs_pk = set(hw.packages) - {CPUSet()}
    if ours_pk != theirs_pk:
        diffs["packages"] = f"hwagent {_sets(ours_pk)} vs hwloc {_sets(theirs_pk)}"

    ours_cores = {k.cpus & visible for k in topo.cores} - {CPUSet()}
    if ours_cores != set(hw.cores):
        diffs["cores"] = f"hwagent {len(ours_cores)} {_sets(ours_cores)[:8]} vs hwloc {len(hw.cores)} {_sets(hw.cores)[:8]}"

    # Totals can agree while packages do not (one package's cores split, another's
    # merged); count per package, packages named by their CPU sets.
    ours_per_pkg = {
        pk: sum(1 for k in ours_cores if k <= pk) for pk in ours_pk
    }
    theirs_per_pkg = {pk: sum(1 for k in hw.cores if k <= pk) for pk in theirs_pk}
    if hw.cores and theirs_pk and ours_per_pkg != theirs_per_pkg:
        bad = [f"package {pk}: {ours_per_pkg.get(pk)} vs {theirs_per_pkg.get(pk)}"
               for pk in sorted(set(ours_per_pkg) | set(theirs_per_pkg), key=CPUSet.first)
               if ours_per_pkg.get(pk) != theirs_per_pkg.get(pk)]
        diffs["cores_per_package"] = "; ".join(bad[:6])


def _compare_nodes(topo: Topology, hw: HwlocView, visible: CPUSet, diffs: dict[str, str]) -> dict[int, NUMANode]:
    """numa_ids, numa_cpus, numa_memory, pu_numa; the allowed nodes, by id."""
    ours_nodes = {n.id: n for n in topo.numa_nodes if topo.allowed_mems is None or n.id in topo.allowed_mems}
    if set(ours_nodes) != set(hw.nodes):
        diffs["numa_ids"] = f"hwagent {CPUSet(ours_nodes)} vs hwloc {CPUSet(hw.nodes)}"

    common = sorted(set(ours_nodes) & set(hw.nodes))
    bad_cpus = [
        f"node{i}: {ours_nodes[i].cpus & visible} vs {hw.nodes[i].cpus}"
        for i in common
        if ours_nodes[i].cpus and ours_nodes[i].cpus & visible != hw.nodes[i].cpus
    ]
    if bad_cpus:
        diffs["numa_cpus"] = "; ".join(bad_cpus)

    bad_mem = []
    for i in common:
        ours, theirs = ours_nodes[i].memory_bytes, hw.nodes[i].local_bytes
        if ours is None and theirs is None:
            continue
        if ours is None or theirs is None or abs(ours - theirs) > hw.nodes[i].unit_bytes:
            bad_mem.append(f"node{i}: {ours} vs {theirs}")
    if bad_mem:
        diffs["numa_memory"] = "; ".join(bad_mem)

    bad_map = []
    for pu in visible & hw.pus:
        ours_node = topo.numa_of_cpu(pu)
        if ours_node not in ours_nodes:
            ours_node = None  # its node's memory is not allowed: hwloc shows no node for it
        theirs = hw.nodes_of_pu(pu)
        if (ours_node is None and theirs) or (ours_node is not None and ours_node not in theirs):
            bad_map.append(pu)
    if bad_map:
        diffs["pu_numa"] = f"cpus {CPUSet(bad_map)} (e.g. cpu{bad_map[0]}: hwagent node {topo.numa_of_cpu(bad_map[0])}, hwloc {sorted(hw.nodes_of_pu(bad_map[0]))})"
    return ours_nodes
