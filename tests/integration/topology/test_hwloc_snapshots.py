"""hwagent's sysfs reader against hwloc, on every real-machine snapshot in tests/fixtures/hwloc-linux.

For each snapshot, hwloc's stored reading (``.console`` or ``.xml``, produced by
hwloc's own test-suite) and, where ``lstopo-no-graphics`` is installed, a fresh
``lstopo -i`` of the same tree are parsed and compared with ``read_topology``:
packages, cores, PUs, NUMA nodes with their CPUs and memory, the PU -> NUMA
mapping, last-level caches and NUMA distances (see ``compare.py``).

Every difference must be listed in ``EXPECTED_DIFFERENCES`` with the reason and
a check that the reason is what actually happens; an explanation that stops
being true fails the test as surely as a new difference does. Snapshots that
hwloc read with options or environment variables are listed in
``READ_WITH_OPTIONS`` with why those settings do (or do not) matter here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from agent.topology.model import Topology
from agent.topology.sysfs import read_topology
from tests.conftest import HWLOC_DIR, hwloc_snapshot_names
from tests.integration.topology.compare import ASPECTS, compare
from tests.integration.topology.hwloc_view import HwlocView, SnapshotTest, parse_test, parse_xml
from tests.integration.topology.snapshots import snapshot_root

SNAPSHOTS = hwloc_snapshot_names()
LSTOPO = shutil.which("lstopo-no-graphics")

Check = Callable[[Topology, HwlocView, Path], None]


# -- the explained differences ------------------------------------------------------
def _ps3_has_no_packages(topo: Topology, hw: HwlocView, root: Path) -> None:
    # The kernel exports only thread_siblings: no physical_package_id, no
    # core_siblings. hwloc then creates no Package object at all; hwagent's model
    # needs a package per CPU and reports the whole machine as package 0.
    topo_dir = root / "sys/devices/system/cpu/cpu0/topology"
    assert not (topo_dir / "physical_package_id").exists()
    assert hw.packages == []
    assert topo.package_ids == (0,) and topo.cpus_of_package(0) == topo.online
    assert any("no physical_package_id and no package cpu set" in w for w in topo.warnings)


def _fake_has_no_cores(topo: Topology, hw: HwlocView, root: Path) -> None:
    # A hand-made tree with physical_package_id and core_siblings only: no
    # core_id, no thread_siblings. hwloc puts the PUs straight under Groups
    # (no Core objects); hwagent treats each CPU as its own core, with a warning.
    assert not (root / "sys/devices/system/cpu/cpu0/topology/thread_siblings").exists()
    assert hw.cores == []
    assert all(len(k.cpus) == 1 for k in topo.cores)
    assert any("no usable thread sibling list" in w for w in topo.warnings)


def _buggy_numa_merged(topo: Topology, hw: HwlocView, root: Path) -> None:
    # Firmware lists all 8 CPUs in each of 8 nodes. hwloc merges the identical
    # nodes into node 0 and drops the memory of the others; hwagent keeps the
    # CPUs in the first node that claims them (node 0) and reports nodes 1-7
    # as CPU-less nodes with their memory, warning about the table.
    assert set(hw.nodes) == {0} and hw.nodes[0].cpus == topo.online
    assert topo.cpus_of_numa(0) == topo.online
    others = [n for n in topo.numa_nodes if n.id != 0]
    assert others and all(n.memory_only and n.memory_bytes for n in others)
    assert any("buggy NUMA table" in w for w in topo.warnings)


def _overlapping_nodes(topo: Topology, hw: HwlocView, root: Path) -> None:
    # A fake tree whose node cpulists overlap on purpose; hwloc read it with
    # HWLOC_DEBUG_ALLOW_OVERLAPPING_NODE_CPUSETS=1 and keeps the overlap.
    # hwagent gives every CPU exactly one node (the first listing it) and warns:
    # the CPU policy needs a partition. hwloc's node CPUs are the raw cpulists.
    node_dir = root / "sys/devices/system/node"
    for nid, node in hw.nodes.items():
        raw = CPUSet.from_mask((node_dir / f"node{nid}/cpumap").read_text().replace("\x00", ""))
        if raw:
            assert node.cpus == raw
    assert all(topo.numa_of_cpu(c) is None or c in topo.cpus_of_numa(topo.numa_of_cpu(c)) for c in topo.online)
    assert any("buggy NUMA table" in w for w in topo.warnings)


def _initiator_locality(topo: Topology, hw: HwlocView, root: Path) -> None:
    # CPU nodes 0-3 have no memory; memory lives in CPU-less nodes 5-10.
    # hwloc hides memoryless nodes and places each memory node near the CPUs
    # named by sysfs access0/access1 initiators; hwagent reports what the kernel
    # says a CPU belongs to (nodes 0-3, 0 bytes) and the memory nodes as
    # memory-only. The process may only use memory nodes 5-10 (its cpuset),
    # so hwloc's PU -> node mapping names those.
    cpu_nodes = {topo.numa_of_cpu(c) for c in topo.online}
    assert all(topo.numa_node(n).memory_bytes == 0 for n in cpu_nodes if n is not None)
    assert topo.allowed_mems is not None and not (cpu_nodes & set(topo.allowed_mems))
    assert all(topo.numa_node(n).memory_only for n in hw.nodes)
    assert (root / "sys/devices/system/node/node5/access1/initiators").is_dir()


def _gpu_memory_nodes(topo: Topology, hw: HwlocView, root: Path) -> None:
    # POWER9 + V100: the GPUs' memory appears as CPU-less NUMA nodes 250-255.
    # hwloc deliberately ignores NVIDIA GPU NUMA nodes; hwagent reports them as
    # memory-only nodes (that is what makes GPU memory visible to placement).
    extra = {n.id for n in topo.numa_nodes} - set(hw.nodes)
    assert extra and all(topo.numa_node(n).memory_only for n in extra)
    assert min(extra) >= 250


#: snapshot -> {aspect that differs: (why, check that the why holds)}
EXPECTED_DIFFERENCES: dict[str, dict[str, tuple[str, Check]]] = {
    "2ps3-2t": {"packages": ("kernel has no package info; hwloc shows none, hwagent one", _ps3_has_no_packages)},
    "4fake-4gr1nu1pu": {"cores": ("no core info; hwloc shows no cores, hwagent 1 cpu/core", _fake_has_no_cores)},
    "8em64t-2s2ca2c-buggynuma": {"numa_ids": ("hwloc merges duplicated nodes", _buggy_numa_merged)},
    "fakeheterocpunuma": {"numa_cpus": ("overlapping nodes allowed by an hwloc debug env", _overlapping_nodes)},
    "fakememinitiators-1np2c+1npp+gi": {"pu_numa": ("hwloc uses memory initiators", _initiator_locality)},
    "nvidiagpunumanodes": {"numa_ids": ("hwloc ignores NVIDIA GPU memory nodes", _gpu_memory_nodes)},
}

#: snapshots hwloc read with options/env (see their .test), and why that does or does not matter here
READ_WITH_OPTIONS: dict[str, str] = {
    "2i386-2c-nohugepage": "--no-icaches hides instruction caches; only data/unified LLCs are compared",
    "2i386-2t-hugepagesizecount": "--no-icaches hides instruction caches; only data/unified LLCs are compared",
    "32amd64-4s2n4c-cgroup2": "--no-icaches as above; the cgroup2 cpuset (0-5) is read by hwagent too",
    "32em64t-2n8c+dax+nvme+mic+dimms": "--whole-io adds I/O objects only, none of which is compared",
    "40intel64-2g2n4c+pcilocality": "--whole-io and HWLOC_PCI_LOCALITY change where PCI devices attach, not CPUs",
    "fakepcilocalities": "HWLOC_PCI_LOCALITY adds Groups of PUs for PCI locality; Groups are not compared",
    "fakeheterocpunuma": "HWLOC_DEBUG_ALLOW_OVERLAPPING_NODE_CPUSETS keeps overlapping nodes: see EXPECTED_DIFFERENCES",
}


def _test_case(name: str) -> SnapshotTest:
    return parse_test(HWLOC_DIR / f"{name}.test")


def _check(name: str, topo: Topology, hw: HwlocView, root: Path) -> None:
    diffs = compare(topo, hw)
    expected = EXPECTED_DIFFERENCES.get(name, {})
    unexplained = {k: v for k, v in diffs.items() if k not in expected}
    assert not unexplained, f"{name}: hwagent and hwloc disagree: {unexplained}"
    stale = set(expected) - set(diffs)
    assert not stale, f"{name}: explained difference(s) {stale} no longer occur; update EXPECTED_DIFFERENCES"
    for _why, check in expected.values():
        check(topo, hw, root)


def _read(root: Path) -> Topology:
    return read_topology(root / "sys", root / "proc", self_cgroup=True)


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_snapshot_matches_stored_hwloc_reading(name: str, hwloc_extract) -> None:
    case = _test_case(name)
    hw = case.view()
    assert hw.pus, f"{case.target.name}: parsed no PUs"
    assert hw.consistent_with_declared_counts(), f"{case.target.name}: parser disagrees with hwloc's own counts"
    root = snapshot_root(hwloc_extract, name)
    _check(name, _read(root), hw, root)


@pytest.mark.skipif(LSTOPO is None, reason="lstopo-no-graphics not installed (apt package hwloc)")
@pytest.mark.parametrize("name", SNAPSHOTS)
def test_snapshot_matches_installed_lstopo(name: str, hwloc_extract) -> None:
    """The same comparison against the hwloc installed here, run with the .test's env."""
    case = _test_case(name)
    root = snapshot_root(hwloc_extract, name)
    env = dict(os.environ)
    for assignment in case.env:
        key, _, value = assignment.partition("=")
        env[key.strip()] = value.strip().strip('"')
    out = subprocess.run(
        [str(LSTOPO), "--if", "fsroot", "-i", str(root), "--of", "xml"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    _check(name, _read(root), parse_xml(out.stdout), root)


def test_every_snapshot_with_options_is_explained() -> None:
    with_options = {n for n in SNAPSHOTS if _test_case(n).options or _test_case(n).env}
    assert with_options == set(READ_WITH_OPTIONS), "explain the options of every snapshot read with them"


def test_expectations_name_real_snapshots_and_aspects() -> None:
    assert set(EXPECTED_DIFFERENCES) <= set(SNAPSHOTS)
    assert all(set(v) <= set(ASPECTS) for v in EXPECTED_DIFFERENCES.values())


def test_there_are_snapshots() -> None:
    # Without the snapshots every parametrised test above silently vanishes.
    assert len(SNAPSHOTS) >= 30, f"hwloc snapshots missing under {HWLOC_DIR}"
