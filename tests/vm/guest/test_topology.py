"""Topology discovery on a real kernel with the multi-node shape qemu was asked for.

Two independent readers are held against the qemu spec: hwloc's lstopo (the peer: it
proves the guest really has the shape, so a failure of the second one is hwagent's) and
hwagent's own agent.topology.sysfs.read_topology.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from tests.vm.topologies import GuestTopology

SYS_CPU = Path("/sys/devices/system/cpu")


def _hwloc_set(mask: str) -> CPUSet:
    """hwloc bitmap "0x0000000f" or "0x00000001,0xffffffff" -> CPUSet ("" = empty)."""
    groups = [g.strip() for g in mask.split(",") if g.strip()]
    return CPUSet.from_mask(",".join(g[2:] if g.startswith("0x") else g for g in groups) or "0")


def lstopo() -> dict:
    """lstopo's view: NUMA node cpusets, packages' PUs, cores' PUs, distance matrix."""
    xml = subprocess.run(["lstopo-no-graphics", "--of", "xml", "--no-io"], capture_output=True,
                         text=True, check=True, timeout=120).stdout
    root = ET.fromstring(xml)
    nodes = {int(o.get("os_index")): _hwloc_set(o.get("cpuset", "0x0"))
             for o in root.iter("object") if o.get("type") == "NUMANode"}
    packages = {int(o.get("os_index")): _hwloc_set(o.get("cpuset"))
                for o in root.iter("object") if o.get("type") == "Package"}
    cores = sorted((_hwloc_set(o.get("cpuset")) for o in root.iter("object") if o.get("type") == "Core"),
                   key=lambda s: s.first())
    distances: dict[tuple[int, int], int] = {}
    for d in root.iter("distances2"):
        if d.get("type") != "NUMANode":
            continue
        idx = [int(x) for x in d.find("indexes").text.split()]
        vals = [int(x) for v in d.findall("u64values") for x in v.text.split()]
        for n, v in enumerate(vals):
            distances[(idx[n // len(idx)], idx[n % len(idx)])] = v
    return {"nodes": nodes, "packages": packages, "cores": cores, "distances": distances}


def expected_cores(topo: GuestTopology) -> list[CPUSet]:
    present = set(topo.present_cpus())
    groups = {topo.siblings_of(c) for c in present}
    return sorted((CPUSet(c for c in g if c in present) for g in groups), key=lambda s: s.first())


def test_lstopo_sees_the_requested_shape(topo: GuestTopology) -> None:
    """The tier itself: qemu + the guest kernel really produce the asked-for topology."""
    seen = lstopo()
    assert sorted(seen["nodes"]) == list(range(len(topo.nodes)))
    # hwloc hangs a memory-only node under its nearest CPUs and gives it their cpuset,
    # so only nodes with CPUs are compared by cpuset
    assert {i: s for i, s in seen["nodes"].items() if i not in topo.memory_only_nodes()} == {
        i: CPUSet(topo.node_cpus_present(i)) for i in range(len(topo.nodes)) if i not in topo.memory_only_nodes()
    }
    assert seen["packages"] == {
        p: CPUSet(c for c in topo.present_cpus() if topo.package_of(c) == p)
        for p in range(topo.sockets)
        if any(topo.package_of(c) == p for c in topo.present_cpus())
    }
    assert seen["cores"] == expected_cores(topo)
    n = len(topo.nodes)
    assert seen["distances"] == {(i, j): topo.distances[i][j] for i in range(n) for j in range(n)}


@pytest.fixture(scope="module")
def sysfs_reader():
    mod = pytest.importorskip("agent.topology.sysfs", reason="agent.topology.sysfs (read_topology) not in this tree")
    return mod.read_topology


def test_read_topology_matches_qemu(topo: GuestTopology, sysfs_reader) -> None:
    t = sysfs_reader()
    present = CPUSet(topo.present_cpus())
    assert t.online == present
    assert t.present == present
    assert t.possible == CPUSet(range(topo.maxcpus))
    assert t.offline == CPUSet(range(topo.maxcpus)) - present
    # NUMA nodes: cpulists, memory-only nodes, memory present on each
    assert t.numa_ids == tuple(range(len(topo.nodes)))
    for i, node in enumerate(topo.nodes):
        assert t.cpus_of_numa(i) == CPUSet(topo.node_cpus_present(i)), f"node{i} cpus"
        assert t.numa_node(i).memory_only == (not node.cpus), f"node{i} memory_only"
        mem = t.numa_node(i).memory_bytes
        assert mem is not None and 0.8 * node.mem_mib * 2**20 <= mem <= node.mem_mib * 2**20, f"node{i} memory {mem}"
    # distances, in both directions (numa4 is asymmetric on purpose)
    for i, row in enumerate(topo.distances):
        for j, d in enumerate(row):
            assert t.distance(i, j) == d, f"distance {i}->{j}"
    # packages, cores, SMT siblings, CPU -> node
    assert t.package_ids == tuple(sorted({topo.package_of(c) for c in present}))
    for c in present:
        cpu = t.cpu(c)
        assert cpu.package_id == topo.package_of(c), f"cpu{c} package"
        assert t.siblings(c) == CPUSet(s for s in topo.siblings_of(c) if s in present), f"cpu{c} siblings"
        assert t.numa_of_cpu(c) == topo.node_of(c), f"cpu{c} node"
    assert sorted((core.cpus for core in t.cores), key=lambda s: s.first()) == expected_cores(topo)
    assert t.threads_per_core == topo.threads
    for p in t.package_ids:
        assert t.numa_nodes_of_package(p) == tuple(
            sorted({topo.node_of(c) for c in present if topo.package_of(c) == p})
        ), f"package {p} nodes"


@contextmanager
def cpu_offline(cpu: int):
    online = SYS_CPU / f"cpu{cpu}" / "online"
    online.write_text("0")
    try:
        yield
    finally:
        online.write_text("1")


def test_read_topology_follows_a_cpu_taken_offline(topo: GuestTopology, sysfs_reader) -> None:
    """Offline CPUs are a live kernel state no fixture tree shows evolving."""
    victim = topo.ncpus - 1
    sibling = next(s for s in topo.siblings_of(victim) if s != victim)
    with cpu_offline(victim):
        t = sysfs_reader()
        assert victim in t.offline and victim not in t.online
        assert t.siblings(sibling) == CPUSet([sibling])
        assert victim not in t.cpus_of_numa(topo.node_of(victim))
    t = sysfs_reader()
    assert victim in t.online and t.siblings(sibling) == CPUSet(topo.siblings_of(victim))
