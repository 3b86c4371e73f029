"""The per-node memory reader on the fixture trees (2, 4, 8 nodes, memory-only nodes) and the live machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.memory.sysfs import hugepage_resource, page_size_of, read_memory

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "memory"
MI = 1 << 20


@pytest.mark.parametrize("tree,nodes", [
    ("numa2", (0, 1)), ("numa4", (0, 1, 2, 3)), ("numa8", tuple(range(8))), ("memtiers", (0, 1, 2, 4, 6, 8, 9)),
])
def test_every_node_is_read(tree: str, nodes: tuple[int, ...]) -> None:
    m = read_memory(FIX / tree / "sys")
    assert tuple(n.node for n in m.nodes) == nodes
    assert m.warnings == ()
    for n in m.nodes:
        assert 0 < n.mem_free <= n.mem_total


def test_hugepage_pools_per_node() -> None:
    m = read_memory(FIX / "numa4" / "sys")
    assert m.page_sizes == (2 * MI, 1 << 30)
    assert m.resources() == ("memory", "hugepages-2Mi", "hugepages-1Gi")
    n3 = m.node(3)
    assert n3 is not None
    assert n3.hugepages[2 * MI].nr == 256 + 64 * 3
    assert n3.hugepages[2 * MI].total_bytes == (256 + 64 * 3) * 2 * MI
    assert n3.hugepages[1 << 30].nr == 2
    assert n3.mem_total == 131072 * MI  # meminfo says 134217728 kB


def test_memory_only_nodes_are_included_without_cpus() -> None:
    m = read_memory(FIX / "memtiers" / "sys")
    assert {n.node for n in m.nodes if not n.has_cpu} == {4, 6, 8, 9}
    assert all(n.hugepages[2 * MI].nr == 32 for n in m.nodes)


def test_unconfigured_pools_read_as_zero_pages() -> None:
    m = read_memory(FIX / "numa8" / "sys")
    assert [m.node(i).hugepages[2 * MI].nr for i in (6, 7)] == [0, 0]  # type: ignore[union-attr]


def test_surplus_pages_are_not_capacity(tmp_path: Path) -> None:
    d = tmp_path / "devices/system/node/node0"
    (d / "hugepages/hugepages-2048kB").mkdir(parents=True)
    (d / "meminfo").write_text("Node 0 MemTotal:  1048576 kB\nNode 0 MemFree:  524288 kB\n")
    for f, v in (("nr_hugepages", 10), ("free_hugepages", 4), ("surplus_hugepages", 3)):
        (d / "hugepages/hugepages-2048kB" / f).write_text(f"{v}\n")
    (node,) = read_memory(tmp_path).nodes
    assert node.mem_total == 1 << 30 and node.mem_free == 512 * MI
    assert node.hugepages[2 * MI].total_bytes == 7 * 2 * MI


def test_a_root_without_nodes_reads_empty_with_a_warning(tmp_path: Path) -> None:
    m = read_memory(tmp_path)
    assert m.nodes == () and m.warnings


def test_resource_names() -> None:
    assert hugepage_resource(2 * MI) == "hugepages-2Mi"
    assert hugepage_resource(1 << 30) == "hugepages-1Gi"
    assert hugepage_resource(64 << 10) == "hugepages-64Ki"
    assert page_size_of("hugepages-2Mi") == 2 * MI
    assert page_size_of("hugepages-16Gi") == 16 << 30
    assert page_size_of("memory") is None and page_size_of("hugepages-2Xi") is None


@pytest.mark.skipif(not os.path.isdir("/sys/devices/system/node/node0"), reason="no NUMA sysfs here")
def test_live_machine() -> None:
    m = read_memory("/sys")
    assert m.nodes, m.warnings
    for n in m.nodes:
        assert 0 <= n.mem_free <= n.mem_total
    # (no comparison with /proc/meminfo: on this machine it counts hot-plugged blocks the node's meminfo does not)
    with open("/proc/sys/vm/nr_hugepages") as f:
        nr = int(f.read())
    assert sum(n.hugepages[2 * MI].nr for n in m.nodes if 2 * MI in n.hugepages) == nr
