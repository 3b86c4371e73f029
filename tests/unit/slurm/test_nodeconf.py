"""The slurm.conf node line: counts, RealMemory as slurmd computes it, reserved CPUs and memory.

Expected values are reasoned from the shapes (synthetic ones, and hwloc snapshots whose
names say their shape: 16em64t-4s2c2t is 4 sockets x 2 cores x 2 threads); the
comparison with the real slurmd is tests/integration/slurm/test_slurmd_peer.py.
"""

from __future__ import annotations

import pytest

from agent.cpuset import CPUSet
from agent.slurm.cores import SlurmCores
from agent.slurm.nodeconf import NodeLine, cpu_spec, mem_spec_mib, node_shape, real_memory_mib, render_node_line
from agent.topology.model import synthetic
from agent.topology.sysfs import read_topology


def _snapshot(hwloc_extract, name):
    root = hwloc_extract(name)
    return read_topology(str(root / "sys"), str(root / "proc"), log_warnings=False)


def test_two_sockets_two_numa_each_spread_siblings():
    # 2 sockets x 2 NUMA x 2 cores x 2 threads, second threads numbered after all first ones (0 and 8 siblings)
    topo = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)
    s = node_shape(topo)
    assert (s.cpus, s.boards, s.sockets_per_board, s.cores_per_socket, s.threads_per_core) == (16, 1, 2, 4, 2)
    assert s.notes == ()
    assert s.cpus == s.boards * s.sockets_per_board * s.cores_per_socket * s.threads_per_core


@pytest.mark.parametrize("name, want", [
    ("16em64t-4s2c2t", (16, 4, 2, 2)),            # 4 sockets, 2 cores, 2 threads
    ("32intel64-2p8co2t+8ve", (32, 2, 8, 2)),     # 2 packages, 8 cores, 2 threads
    ("256ia64-64n2s2c", (256, 128, 2, 1)),        # 64 nodes x 2 sockets x 2 cores: 128 sockets
    ("128ia64-17n4s2c", (128, 64, 2, 1)),         # 16 CPU nodes x 4 sockets x 2 cores (+1 memory node)
    ("nvidiagpunumanodes", (32, 2, 4, 4)),        # POWER9-like SMT4: 2 sockets x 4 cores x 4 threads
])
def test_multi_socket_snapshots(hwloc_extract, name, want):
    s = node_shape(_snapshot(hwloc_extract, name))
    assert (s.cpus, s.sockets_per_board, s.cores_per_socket, s.threads_per_core) == want
    assert s.boards == 1 and s.notes == ()


def test_uneven_sockets_write_a_consistent_line_and_say_what_is_lost(hwloc_extract):
    # cpu0 offline: 17 cores over 2 sockets. slurm.conf would reset CPUs=17 (not 2*8*1), so the
    # line says 16 (never above what slurmd reports, so never "Low CPUs") and a note says why
    s = node_shape(_snapshot(hwloc_extract, "offline-cpu0-node0"))
    assert (s.cpus, s.sockets_per_board, s.cores_per_socket, s.threads_per_core) == (16, 2, 8, 1)
    assert any("17 cores do not divide over 2 sockets" in n for n in s.notes)
    assert any("CPUs=16, not the 17 online" in n for n in s.notes)


def test_real_memory_is_slurmds_float_arithmetic():
    # this VM: MemTotal 24683772 kB -> 24105 MiB, what `slurmd -C` printed here
    assert real_memory_mib(24683772, 4096) == 24105
    # 2**27 + 255 pages: a C float holds it as 2**27 + 256, so slurmd says 524289 MiB where
    # MemTotal // 1024 says 524288 (the float only ever raises the figure below 16 TiB)
    pages = 2**27 + 255
    assert (pages * 4) // 1024 == 524288
    assert real_memory_mib(pages * 4, 4096) == 524289
    with pytest.raises(ValueError):
        real_memory_mib(1024, 0)


def test_mem_spec_rounds_up_and_none_without_reservation():
    assert mem_spec_mib(0) is None
    assert mem_spec_mib(1 << 30) == 1024
    assert mem_spec_mib((1 << 30) + 1) == 1025


def test_cpu_spec_names_the_same_cpus_in_abstract_ids():
    topo = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=2, threads_per_core=2)
    # cores (abstract index: kernel CPUs): 0: {0,4}, 1: {1,5}, 2: {2,6}, 3: {3,7}
    assert [k.cpus for k in SlurmCores(topo).ordered] == [CPUSet([0, 4]), CPUSet([1, 5]), CPUSet([2, 6]), CPUSet([3, 7])]
    # kernel CPU 4 is the second thread of core 0 -> abstract 0*2+1; CPU 2 is core 2's first -> 4
    assert cpu_spec(topo, CPUSet([4, 2]), "list") == ("CpuSpecList", "1,4")
    assert cpu_spec(topo, CPUSet([4, 2]), "count") == ("CoreSpecCount", "2")
    assert cpu_spec(topo, CPUSet([0, 4]), "count") == ("CoreSpecCount", "1")
    assert cpu_spec(topo, CPUSet(), "list") is None
    with pytest.raises(ValueError):
        cpu_spec(topo, CPUSet([0]), "some")


def test_render_node_line():
    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2, threads_per_core=1)
    line = NodeLine("n1", node_shape(topo), 24105, ("CpuSpecList", "0"), 512, ("scratch:1", "gpu:pci_10de_2330:2"))
    assert render_node_line(line) == ("NodeName=n1 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 "
                                      "RealMemory=24105 CpuSpecList=0 MemSpecLimit=512 Gres=scratch:1,gpu:pci_10de_2330:2")
