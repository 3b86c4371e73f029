"""read_topology on hand-made trees: the healthy case, then one defect at a time."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from agent.topology.sysfs import TopologyError, read_topology
from tests.unit.topology.fake_sysfs import FakeMachine


@pytest.fixture
def machine(tmp_path: Path) -> FakeMachine:
    return FakeMachine(tmp_path).build()


def read(m: FakeMachine, **kw):
    return read_topology(str(m.sys), str(m.proc), **kw)


def warned(topo, *fragments: str) -> list[str]:
    return [w for w in topo.warnings if all(f in w for f in fragments)]


# -- healthy ----------------------------------------------------------------------
def test_healthy_tree_reads_everything_without_warnings(machine: FakeMachine) -> None:
    t = read(machine)
    assert t.warnings == ()
    assert t.online == CPUSet.parse("0-7")
    assert t.package_ids == (0, 1)
    assert t.cpus_of_package(1) == CPUSet.parse("2-3,6-7")
    assert len(t.cores) == 4 and t.threads_per_core == 2
    assert t.siblings(0) == CPUSet([0, 4])
    assert t.numa_ids == (0, 1)
    assert t.cpus_of_numa(1) == CPUSet.parse("2-3,6-7")
    assert t.numa_of_cpu(6) == 1
    assert t.numa_node(0).memory_bytes == (4 << 20) * 1024
    assert t.distance(0, 1) == 21 and t.distance(1, 1) == 10
    # 4 cores x (L1d, L1i, L2) + 2 L3, each instance once
    assert len(t.caches) == 14
    assert [c.cpus for c in t.last_level_caches] == [CPUSet.parse("0-1,4-5"), CPUSet.parse("2-3,6-7")]
    llc = t.llc_of(3)
    assert llc is not None and llc.size_bytes == 32 << 20 and llc.line_size == 64 and llc.ways == 8
    assert t.allowed_cpus is None  # fixture roots do not describe this process
    assert t.source == str(machine.sys)


def test_wrong_root_raises_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match=rf"{tmp_path}/devices/system/cpu"):
        read_topology(str(tmp_path), str(tmp_path))


# -- per-CPU files --------------------------------------------------------------------
def test_missing_die_id_is_die_zero_with_one_warning_for_all_cpus(machine: FakeMachine) -> None:
    machine.remove("sys/devices/system/cpu/cpu*/topology/die_id")
    t = read(machine)
    assert {c.die_id for c in t.cpus} == {0}
    (w,) = warned(t, "die_id")
    assert w.startswith("cpus 0-7:")


def test_odd_package_ids_follow_the_package_sets(machine: FakeMachine) -> None:
    # s390: physical_package_id is -1, the package CPU sets still group CPUs
    for c in range(machine.ncpus):
        machine.write(f"sys/devices/system/cpu/cpu{c}/topology/physical_package_id", "-1\n")
    t = read(machine)
    assert len(t.package_ids) == 2
    assert {t.cpus_of_package(p) for p in t.package_ids} == {machine.package_cpus(0), machine.package_cpus(1)}
    assert warned(t, "no physical_package_id", "package cpu set")


def test_one_package_id_for_disjoint_package_sets_is_split(machine: FakeMachine) -> None:
    # old ia64: every single-core socket reports package 0
    for c in range(machine.ncpus):
        machine.write(f"sys/devices/system/cpu/cpu{c}/topology/physical_package_id", "0\n")
    t = read(machine)
    assert len(t.package_ids) == 2 and 0 in t.package_ids
    assert warned(t, "physical_package_id 0", "split")


def test_no_package_information_at_all_is_package_zero(machine: FakeMachine) -> None:
    machine.remove("sys/devices/system/cpu/cpu*/topology/physical_package_id")
    machine.remove("sys/devices/system/cpu/cpu*/topology/package_cpus_list")
    machine.remove("sys/devices/system/cpu/cpu*/topology/core_siblings_list")
    t = read(machine)
    assert t.package_ids == (0,)
    assert warned(t, "assuming package 0")


def test_thread_siblings_fall_back_to_the_older_files(machine: FakeMachine) -> None:
    machine.remove("sys/devices/system/cpu/cpu*/topology/core_cpus*")
    t = read(machine)
    assert t.siblings(1) == CPUSet([1, 5]) and t.warnings == ()
    machine.remove("sys/devices/system/cpu/cpu*/topology/thread_siblings_list")
    t = read(machine)
    assert len(t.cores) == 8  # each CPU its own core
    assert warned(t, "no usable thread sibling list")


def test_list_and_mask_disagreeing_prefers_the_one_naming_the_cpu(machine: FakeMachine) -> None:
    # a hand-edited snapshot: cpu1's list names other CPUs, its mask is right
    machine.write("sys/devices/system/cpu/cpu1/topology/core_cpus_list", "0,4\n")
    t = read(machine)
    assert t.siblings(1) == CPUSet([1, 5])


def test_no_topology_directory_uses_proc_cpuinfo(machine: FakeMachine) -> None:
    machine.remove("sys/devices/system/cpu/cpu*/topology")
    t = read(machine)
    assert t.package_ids == (0, 1)
    assert t.siblings(0) == CPUSet([0, 4])  # same (physical id, core id) in cpuinfo
    assert warned(t, "/proc/cpuinfo")


def test_no_topology_and_no_cpuinfo_still_reads(machine: FakeMachine) -> None:
    machine.remove("sys/devices/system/cpu/cpu*/topology")
    machine.remove("proc/cpuinfo")
    t = read(machine)
    assert t.online == CPUSet.parse("0-7") and len(t.cores) == 8
    assert warned(t, "no ids in /proc/cpuinfo")


# -- CPU sets -------------------------------------------------------------------------
def test_offline_cpus_are_left_out_of_the_cpus(machine: FakeMachine) -> None:
    machine.write("sys/devices/system/cpu/online", "0-1,3-7\n")
    machine.write("sys/devices/system/cpu/offline", "2\n")
    machine.remove("sys/devices/system/cpu/cpu2/topology")  # the kernel hides it
    machine.remove("sys/devices/system/cpu/cpu2/cache")
    t = read(machine)
    assert t.online == CPUSet.parse("0-1,3-7")
    assert t.offline == CPUSet([2])
    assert t.siblings(6) == CPUSet([6])  # its sibling 2 is offline
    assert t.cpus_of_numa(1) == CPUSet.parse("3,6-7")
    assert t.warnings == ()


def test_without_online_file_per_cpu_online_flags_count(machine: FakeMachine) -> None:
    machine.remove("sys/devices/system/cpu/online")
    machine.remove("sys/devices/system/cpu/offline")
    # a hotplug kernel gives every CPU but (often) cpu0 an online file
    for c in range(1, machine.ncpus):
        machine.write(f"sys/devices/system/cpu/cpu{c}/online", "0\n" if c == 5 else "1\n")
    t = read(machine)
    assert t.online == CPUSet.parse("0-4,6-7")
    assert t.offline == CPUSet([5])  # possible - online


@pytest.mark.parametrize(
    "flags",
    [
        {5: False},  # only the offline CPU has a file
        {2: True, 5: False, 6: False},  # some CPUs have one, cpu1 (the first non-zero) not
    ],
)
def test_without_online_file_every_cpus_own_flag_counts(machine: FakeMachine, flags: dict[int, bool]) -> None:
    # a CPU without cpuN/online cannot be unplugged and is online; a "0" is
    # offline wherever it is, not only when cpu1 happens to have a file too
    machine.per_cpu_online(flags)
    t = read(machine)
    offline = CPUSet(c for c, up in flags.items() if not up)
    assert t.online == CPUSet(range(machine.ncpus)) - offline
    assert t.offline == offline
    assert t.warnings == ()


def test_without_online_files_at_all_every_cpu_is_online(machine: FakeMachine) -> None:
    # kernels without CPU hotplug (old ia64): neither cpu/online nor cpuN/online
    machine.remove("sys/devices/system/cpu/online")
    machine.remove("sys/devices/system/cpu/offline")
    t = read(machine)
    assert t.online == CPUSet.parse("0-7") and t.offline == CPUSet()


def test_isolated_cpus_are_read(machine: FakeMachine) -> None:
    machine.write("sys/devices/system/cpu/isolated", "2-3\n")
    assert read(machine).isolated == CPUSet([2, 3])


def test_online_cpu_without_directory_is_reported(machine: FakeMachine) -> None:
    machine.write("sys/devices/system/cpu/online", "0-8\n")
    t = read(machine)
    assert 8 not in t.online
    assert warned(t, "cpus 8 are online but have no")


# -- NUMA -----------------------------------------------------------------------------
def test_cpu_in_two_nodes_stays_in_the_first(machine: FakeMachine) -> None:
    machine.write("sys/devices/system/node/node1/cpulist", "0,2-3,6-7\n")
    t = read(machine)
    assert t.numa_of_cpu(0) == 0
    assert 0 not in t.numa_node(1).cpus
    assert warned(t, "node1: cpus 0 are already in node(s) 0", "buggy NUMA table")


def test_cpu_in_no_node_has_no_node(machine: FakeMachine) -> None:
    machine.write("sys/devices/system/node/node1/cpulist", "2-3,6\n")
    t = read(machine)
    assert t.numa_of_cpu(7) is None
    assert warned(t, "cpus 7 are in no NUMA node")


def test_missing_distance_file_gives_no_distances(machine: FakeMachine) -> None:
    machine.remove("sys/devices/system/node/node1/distance")
    t = read(machine)
    assert t.distance(1, 0) is None and t.distance(0, 1) == 21
    assert warned(t, "node1: no distance file")


def test_distance_row_of_wrong_length_is_ignored(machine: FakeMachine) -> None:
    machine.write("sys/devices/system/node/node0/distance", "10 21 31\n")
    machine.write("sys/devices/system/node/node1/distance", "21 x\n")
    t = read(machine)
    assert t.numa_node(0).distances == {} and t.numa_node(1).distances == {}
    assert warned(t, "node0: distance row has 3 entries for 2 online nodes")
    assert warned(t, "node1: unreadable distance row")


def test_distance_row_for_possible_nodes_is_mapped_to_existing_ones(machine: FakeMachine) -> None:
    # node0 taken offline by hand, its distance column left in place
    machine.write("sys/devices/system/node/online", "1\n")
    machine.remove("sys/devices/system/node/node0")
    t = read(machine)
    assert t.numa_node(1).distances == {1: 10}
    assert warned(t, "matches the possible nodes")


def test_memory_only_node(tmp_path: Path) -> None:
    m = FakeMachine(tmp_path, extra_nodes={4: 16 << 20}).build()
    t = read(m)
    node = t.numa_node(4)
    assert node.memory_only and node.memory_bytes == (16 << 20) * 1024
    assert t.package_of_numa(4) is None
    assert t.distance(0, 4) == 30 and t.distance(4, 4) == 10
    assert t.numa_nodes_of_package(0) == (0,)
    assert t.warnings == ()


def test_bad_cpulist_text_falls_back_to_cpumap(machine: FakeMachine) -> None:
    machine.write("sys/devices/system/node/node1/cpulist", "2-a\n")
    t = read(machine)
    assert t.cpus_of_numa(1) == CPUSet.parse("2-3,6-7")
    assert warned(t, "node1/cpulist", "invalid cpu list")


def test_bad_cpulist_and_cpumap_leave_the_node_without_cpus(machine: FakeMachine) -> None:
    machine.write("sys/devices/system/node/node1/cpulist", "3-1\n")
    machine.write("sys/devices/system/node/node1/cpumap", "zz\n")
    t = read(machine)
    assert t.numa_node(1).cpus == CPUSet()
    assert t.numa_of_cpu(2) is None
    assert warned(t, "node1: no readable cpulist/cpumap")


def test_no_node_directory_is_one_node_with_all_cpus(machine: FakeMachine) -> None:
    machine.remove("sys/devices/system/node")
    t = read(machine)
    assert t.numa_ids == (0,)
    assert t.cpus_of_numa(0) == t.online
    assert t.numa_node(0).memory_bytes == (4 << 20) * 2 * 1024  # from proc/meminfo
    assert warned(t, "no NUMA information")


def test_node_meminfo_without_memtotal(machine: FakeMachine) -> None:
    machine.write("sys/devices/system/node/node0/meminfo", "Node 0 MemFree: 5 kB\n")
    t = read(machine)
    assert t.numa_node(0).memory_bytes is None
    assert warned(t, "node0: no MemTotal")


def test_nul_bytes_in_files_are_tolerated(machine: FakeMachine) -> None:
    machine.write("sys/devices/system/node/node0/cpulist", "0-1,4-5\n\x00")
    assert read(machine).cpus_of_numa(0) == CPUSet.parse("0-1,4-5")


# -- caches -----------------------------------------------------------------------------
def test_empty_cache_sharing_map_means_core_local(machine: FakeMachine) -> None:
    for c in range(machine.ncpus):
        machine.write(f"sys/devices/system/cpu/cpu{c}/cache/index3/shared_cpu_list", "\n")
        machine.write(f"sys/devices/system/cpu/cpu{c}/cache/index3/shared_cpu_map", "00000000\n")
    t = read(machine)
    assert {c.cpus for c in t.last_level_caches} == {k.cpus for k in t.cores}
    assert warned(t, "index3", "core-local")


def test_cache_without_level_is_skipped_and_odd_size_is_unknown(machine: FakeMachine) -> None:
    for c in range(machine.ncpus):
        machine.remove(f"sys/devices/system/cpu/cpu{c}/cache/index1/level")
        machine.write(f"sys/devices/system/cpu/cpu{c}/cache/index2/size", "lots\n")
    t = read(machine)
    assert not [c for c in t.caches if c.type == "Instruction"]
    assert all(c.size_bytes is None for c in t.caches_of_level(2))
    assert warned(t, "index1: no level")


# -- the process's own cgroup -------------------------------------------------------------
def test_allowed_sets_from_proc_self_status(machine: FakeMachine) -> None:
    machine.write("proc/self/status", "Name:\tx\nCpus_allowed_list:\t1-2\nMems_allowed_list:\t0\n")
    t = read(machine, self_cgroup=True)
    assert t.allowed_cpus == CPUSet([1, 2]) and t.allowed_mems == CPUSet([0])
    assert read(machine).allowed_cpus is None  # auto: only for the live roots


def test_allowed_sets_from_a_v1_cpuset_mount(machine: FakeMachine) -> None:
    machine.write("proc/self/cpuset", "/job\n")
    machine.write("proc/mounts", "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n")
    machine.write("sys/fs/cgroup/cpuset/job/cpuset.cpus", "4-5\n")
    machine.write("sys/fs/cgroup/cpuset/job/cpuset.mems", "1\n")
    t = read(machine, self_cgroup=True)
    assert t.allowed_cpus == CPUSet([4, 5]) and t.allowed_mems == CPUSet([1])


def test_allowed_sets_from_a_cgroup2_mount(machine: FakeMachine) -> None:
    machine.write("proc/self/cpuset", "/slice/job\n")
    machine.write("proc/mounts", "none /cgroup/unified cgroup2 rw 0 0\n")
    machine.write("cgroup/unified/slice/job/cpuset.cpus.effective", "0-3\n")
    machine.write("cgroup/unified/slice/job/cpuset.mems.effective", "0\n")
    t = read(machine, self_cgroup=True)
    assert t.allowed_cpus == CPUSet.parse("0-3")


def test_unfindable_own_cpuset_warns_root_cpuset_does_not(machine: FakeMachine) -> None:
    machine.write("proc/mounts", "proc /proc proc rw 0 0\n")
    machine.write("proc/self/cpuset", "/\n")
    t = read(machine, self_cgroup=True)
    assert t.allowed_cpus is None and t.warnings == ()
    machine.write("proc/self/cpuset", "/gone\n")
    t = read(machine, self_cgroup=True)
    assert t.allowed_cpus is None and warned(t, "'/gone' not found")


def test_warnings_are_logged(machine: FakeMachine, caplog: pytest.LogCaptureFixture) -> None:
    machine.remove("sys/devices/system/node/node1/distance")
    with caplog.at_level(logging.WARNING, logger="hwagent.topology"):
        read(machine)
    assert any(r.getMessage() == "topology warning" and r.fields["warning"] == "node1: no distance file"
               for r in caplog.records)


# -- kernel "no value" ids and groups ------------------------------------------------
@pytest.mark.parametrize("sentinel", ["65535", "-1", "4294967295"])
def test_cluster_sentinel_is_no_cluster(machine: FakeMachine, sentinel: str) -> None:
    # x86 kernels print 65535 for "no L2 cluster"; the generic code prints -1
    for c in range(machine.ncpus):
        machine.write(f"sys/devices/system/cpu/cpu{c}/topology/cluster_id", f"{sentinel}\n")
    t = read(machine)
    assert {c.cluster_id for c in t.cpus} == {None}
    assert t.groups == ()


def test_clusters_of_several_cores_are_groups(tmp_path: Path) -> None:
    m = FakeMachine(tmp_path, packages=1, cores_per_package=4, threads=2).build()
    for c in range(m.ncpus):
        m.write(f"sys/devices/system/cpu/cpu{c}/topology/cluster_id", f"{100 + m.core_index(c) // 2}\n")
    t = read(m)
    assert [(g.kind, g.id, g.cpus) for g in t.groups] == [
        ("cluster", 100, CPUSet.parse("0-1,4-5")),
        ("cluster", 101, CPUSet.parse("2-3,6-7")),
    ]


def test_one_cluster_per_core_adds_no_group(machine: FakeMachine) -> None:
    for c in range(machine.ncpus):
        machine.write(f"sys/devices/system/cpu/cpu{c}/topology/cluster_id", f"{machine.core_index(c)}\n")
    assert read(machine).groups == ()


def test_missing_core_id_numbers_the_core_by_its_first_sibling(machine: FakeMachine) -> None:
    machine.remove("sys/devices/system/cpu/cpu*/topology/core_id")
    t = read(machine)
    assert len(t.cores) == 4 and t.siblings(4) == CPUSet([0, 4])
    assert t.cpu(4).core_id == 0
    assert warned(t, "cpus 0-7", "no core_id")


def test_repeated_core_id_with_distinct_sibling_sets_stays_two_cores(machine: FakeMachine) -> None:
    # kernels without die_id on two-die packages number cores per die
    for c in range(machine.ncpus):
        machine.write(f"sys/devices/system/cpu/cpu{c}/topology/core_id", "0\n")
    t = read(machine)
    assert len(t.cores) == 4 and t.threads_per_core == 2


# -- caches read once per design --------------------------------------------------------
def _cache_levels(t, cpu: int) -> list[tuple[int, str, int | None]]:
    return sorted((c.level, c.type, c.size_bytes) for c in t.caches if cpu in c.cpus)


def test_a_core_with_another_cache_design_is_read_in_full(machine: FakeMachine) -> None:
    # package 1's cores: index2 is a 4 MiB L3-private-to-the-core cache, not a 2 MiB L2
    for c in machine.package_cpus(1):
        d = f"sys/devices/system/cpu/cpu{c}/cache/index2"
        machine.write(f"{d}/level", "3\n")
        machine.write(f"{d}/size", "4096K\n")
    t = read(machine)
    assert (2, "Unified", 2 << 20) in _cache_levels(t, 0)
    assert (3, "Unified", 4 << 20) in _cache_levels(t, 2)
    assert (2, "Unified", 2 << 20) not in _cache_levels(t, 2)


def test_cpus_with_fewer_or_more_cache_leaves_than_the_first(machine: FakeMachine) -> None:
    # cpus 1 and 5 (one core) have no L3: package 0's L3 is cpu 0's and 4's only
    machine.remove("sys/devices/system/cpu/cpu1/cache/index3")
    machine.remove("sys/devices/system/cpu/cpu5/cache/index3")
    for c in (0, 4):
        machine.write(f"sys/devices/system/cpu/cpu{c}/cache/index3/shared_cpu_list", "0,4\n")
        machine.write(f"sys/devices/system/cpu/cpu{c}/cache/index3/shared_cpu_map", "11\n")
    d = "sys/devices/system/cpu/cpu2/cache/index4"
    for name, value in (("level", "4"), ("type", "Unified"), ("size", "65536K"), ("shared_cpu_list", "2")):
        machine.write(f"{d}/{name}", f"{value}\n")
    t = read(machine)
    assert t.warnings == ()
    assert [c.level for c in t.caches if 1 in c.cpus] == [1, 1, 2]
    assert (4, "Unified", 64 << 20) in _cache_levels(t, 2)
