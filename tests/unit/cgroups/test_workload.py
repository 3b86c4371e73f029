"""WorkloadCgroups on fixture trees: a pure v2 host (which this machine is not) and
v1 with co-mounted controllers; path checks; a missing controller."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cgroups.detect import CgroupError, detect
from agent.cgroups.limits import CgroupLimits
from agent.cgroups.workload import CgroupSetupError, WorkloadCgroups
from agent.cpuset import CPUSet


def v2_tree(root: Path, controllers: str = "cpuset cpu io memory pids") -> Path:
    root.mkdir()
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("\n")
    (root / "cgroup.procs").write_text("")
    (root / "cpuset.mems.effective").write_text("0-1\n")
    return root


def lim(**kw) -> CgroupLimits:
    base = dict(cpus=CPUSet.parse("2-3"), mems=CPUSet.parse("1"), cpu_shares=1024, cpu_quota_us=50000,
                memory_limit=1 << 28, pids_max=64, needs=frozenset({"cpuset", "cpu", "memory", "pids"}))
    base.update(kw)
    return CgroupLimits(**base)


def test_v2_create_enables_controllers_and_writes_limits(tmp_path):
    root = v2_tree(tmp_path / "cg")
    cg = WorkloadCgroups(detect(root), "/hwagent.slice")
    rel = cg.path("podu1", "main")
    procs = cg.create(rel, lim())
    assert procs == [str(root / "hwagent.slice/podu1/main/cgroup.procs")]
    for d in (root, root / "hwagent.slice", root / "hwagent.slice/podu1"):
        assert (d / "cgroup.subtree_control").read_text() == "+cpu +cpuset +memory +pids"
    d = root / "hwagent.slice/podu1/main"
    assert (d / "cpuset.cpus").read_text() == "2-3"
    assert (d / "cpuset.mems").read_text() == "1"
    assert (d / "cpu.weight").read_text() == "39"
    assert (d / "cpu.max").read_text() == "50000 100000"
    assert (d / "memory.max").read_text() == str(1 << 28)
    assert (d / "pids.max").read_text() == "64"
    assert cg.root_mems() == "0-1"
    # drift: a changed limit is rewritten, cpuset files are the CPU policy's
    (d / "pids.max").write_text("max")
    (d / "cpuset.cpus").write_text("0")
    assert cg.reapply(rel, lim()) == ["main/pids.max"]
    assert (d / "pids.max").read_text() == "64" and (d / "cpuset.cpus").read_text() == "0"


def test_v2_without_a_controller_is_a_clear_error_and_leaves_nothing(tmp_path):
    root = v2_tree(tmp_path / "cg", controllers="cpuset cpu memory")
    cg = WorkloadCgroups(detect(root), "/hwagent.slice")
    with pytest.raises(CgroupSetupError, match="cgroup controller pids is not available"):
        cg.create(cg.path("podu1", "main"), lim())
    assert not (root / "hwagent.slice" / "podu1").exists()


def test_reclaimed_on_a_kernel_without_cpu_idle(tmp_path):
    root = v2_tree(tmp_path / "cg")
    cg = WorkloadCgroups(detect(root), "/hwagent.slice")
    rel = cg.path("podu1", "main")
    with pytest.raises(CgroupSetupError, match="no cpu.idle"):
        cg.create(rel, lim(cpu_idle=True))
    # (that the directory is removed again is shown on the real kernel: a fixture
    # tree's control files are regular files, which rmdir does not remove)


def test_v1_comounted_controllers_are_one_directory(tmp_path):
    root = tmp_path / "cg"
    (root / "cpu,cpuacct").mkdir(parents=True)
    (root / "cpu").symlink_to("cpu,cpuacct")
    (root / "cpuacct").symlink_to("cpu,cpuacct")
    for c in ("cpuset", "memory", "pids", "devices"):
        (root / c).mkdir()
    (root / "cpuset" / "cpuset.cpus").write_text("0-3\n")
    (root / "cpuset" / "cpuset.mems").write_text("0\n")
    cg = WorkloadCgroups(detect(root), "/hwagent.slice")
    assert sorted(h.controllers for h in cg.hierarchies) == [("cpu", "cpuacct"), ("cpuset",), ("devices",),
                                                             ("memory",), ("pids",)]
    procs = cg.create(cg.path("podu1", "main"), lim())
    assert len(procs) == 5
    # the intermediate cpusets got the root's CPUs and nodes (v1 starts them empty)
    assert (root / "cpuset/hwagent.slice/cpuset.cpus").read_text() == "0-3"
    assert (root / "cpuset/hwagent.slice/podu1/cpuset.mems").read_text() == "0"
    assert (root / "cpu,cpuacct/hwagent.slice/podu1/main/cpu.cfs_quota_us").read_text() == "50000"


def test_paths_outside_the_subtree_are_refused(tmp_path):
    cg = WorkloadCgroups(detect(v2_tree(tmp_path / "cg")), "/hwagent.slice")
    for bad in ("/hwagent.slice", "/kubepods/pod1/c", "/hwagent.slice/../kubepods", "/hwagent.slicex/p/c", "rel/p"):
        assert not cg.owns(bad)
        with pytest.raises((CgroupError, ValueError)):
            cg.kill(bad)
    assert cg.owns("/hwagent.slice/podu1/main")
    with pytest.raises(CgroupError):
        WorkloadCgroups(detect(tmp_path / "cg"), "/")


def test_v1_cpuset_parent_left_empty_by_a_kill_is_filled_at_the_next_create(tmp_path):
    """A daemon killed between making a pod's cpuset directory and writing its CPUs and
    nodes leaves it empty (as the kernel makes it); the container under it could never
    take CPUs (EACCES on its cpuset.mems). The next create fills it in."""
    root = tmp_path / "cg"
    for c in ("cpuset", "cpu", "memory", "pids"):
        (root / c).mkdir(parents=True)
    (root / "cpuset" / "cpuset.cpus").write_text("0-3\n")
    (root / "cpuset" / "cpuset.mems").write_text("0\n")
    slice_ = root / "cpuset" / "hwagent.slice"
    (slice_ / "podu1").mkdir(parents=True)
    for d in (slice_, slice_ / "podu1"):
        (d / "cpuset.cpus").write_text("\n" if d != slice_ else "0-3\n")
        (d / "cpuset.mems").write_text("\n" if d != slice_ else "0\n")
    cg = WorkloadCgroups(detect(root), "/hwagent.slice")
    cg.create(cg.path("podu1", "main"), lim(cpus=CPUSet.parse("1"), mems=CPUSet.parse("0")))
    assert (slice_ / "podu1" / "cpuset.cpus").read_text().strip() == "0-3"
    assert (slice_ / "podu1" / "cpuset.mems").read_text().strip() == "0"
    assert (slice_ / "podu1" / "main" / "cpuset.cpus").read_text().strip() == "1"


def _v1_tree(root: Path) -> Path:
    for c in ("cpuset", "cpu", "cpuacct", "memory", "pids", "devices"):
        (root / c).mkdir(parents=True)
    (root / "cpuset" / "cpuset.cpus").write_text("0-3\n")
    (root / "cpuset" / "cpuset.mems").write_text("0\n")
    return root


def test_the_subtree_levels_are_checked_once_per_process_not_per_pod(tmp_path, monkeypatch):
    """Issue 23: every container's create stat-ed the subtree's levels in every hierarchy and
    read their cpusets back to see whether they were empty (a kill between a mkdir and its
    writes leaves them so); the levels this process made or checked are not looked at again.
    A pod's own directory is new per pod and still gets its parent's CPUs."""
    import agent.cgroups.workload as wl

    root = _v1_tree(tmp_path / "cg")
    cg = WorkloadCgroups(detect(root), "/hwagent.slice/pods")
    cg.create(cg.path("podu1", "main"), lim())
    seen: list[str] = []
    real = wl._inherit_cpuset
    monkeypatch.setattr(wl, "_inherit_cpuset", lambda parent, child, only_empty: (
        seen.append(str(child)), real(parent, child, only_empty))[-1])
    cg.create(cg.path("podu2", "main"), lim())
    assert seen == [str(root / "cpuset/hwagent.slice/pods/podu2")], seen
    assert (root / "cpuset/hwagent.slice/pods/podu2/cpuset.cpus").read_text() == "0-3"


def test_a_subtree_removed_behind_the_runtime_s_back_is_made_again(tmp_path):
    """The levels remembered as checked may be removed by someone else: the create that finds
    them gone looks again and makes them, with their parent's CPUs, instead of failing."""
    import shutil

    root = _v1_tree(tmp_path / "cg")
    cg = WorkloadCgroups(detect(root), "/hwagent.slice/pods")
    cg.create(cg.path("podu1", "main"), lim())
    for c in ("cpuset", "cpu", "cpuacct", "memory", "pids", "devices"):
        shutil.rmtree(root / c / "hwagent.slice")
    procs = cg.create(cg.path("podu2", "main"), lim())
    assert len(procs) == 6
    assert (root / "cpuset/hwagent.slice/pods/cpuset.cpus").read_text() == "0-3"
    assert (root / "cpuset/hwagent.slice/pods/podu2/main/cpuset.cpus").read_text() == "2-3"


def test_reclaimed_pods_live_under_their_own_subtree_and_both_are_owned(tmp_path):
    """Issue 26: reclaimed pods sit under a top-level sibling of the runtime subtree, so the
    idleness of their CPU time reaches the root; every path check, listing and removal knows both."""
    cg = WorkloadCgroups(detect(v2_tree(tmp_path / "cg")), "/hwagent.slice",
                         reclaimed_subtree="/hwagent-reclaimed.slice")
    assert cg.path("podu1", "main") == "/hwagent.slice/podu1/main"
    assert cg.path("podu1", "main", reclaimed=True) == "/hwagent-reclaimed.slice/podu1/main"
    assert cg.path("podu1", reclaimed=True) == "/hwagent-reclaimed.slice/podu1"
    for rel in ("/hwagent.slice/podu1/main", "/hwagent-reclaimed.slice/podu1/main"):
        assert cg.owns(rel)
    for bad in ("/hwagent-reclaimed.slice", "/hwagent-reclaimed.slicex/p/c", "/hwagent-reclaimed.slice/../x/y"):
        assert not cg.owns(bad)
    root = tmp_path / "cg"
    (root / "hwagent.slice/podu1/main").mkdir(parents=True)
    (root / "hwagent-reclaimed.slice/podu2/main").mkdir(parents=True)
    assert cg.pod_dirs() == {"podu1", "podu2"}
    assert cg.container_paths("podu2") == ["/hwagent-reclaimed.slice/podu2/main"]
    assert cg.container_paths("podu1") == ["/hwagent.slice/podu1/main"]
    (root / "hwagent-reclaimed.slice/podu2/main").rmdir()
    cg.remove_pod_dir("podu2")
    assert not (root / "hwagent-reclaimed.slice/podu2").exists()
    # without a reclaimed subtree, reclaimed pods stay in the runtime subtree (as before)
    flat = WorkloadCgroups(detect(root), "/hwagent.slice")
    assert flat.path("podu1", "main", reclaimed=True) == "/hwagent.slice/podu1/main"


def test_a_reclaimed_subtree_inside_or_around_the_runtime_subtree_is_refused(tmp_path):
    layout = detect(v2_tree(tmp_path / "cg"))
    for bad in ("/hwagent.slice/rec", "/", "/hwagent.slice"):
        with pytest.raises(CgroupError, match="reclaimed"):
            WorkloadCgroups(layout, "/hwagent.slice", reclaimed_subtree=bad)
    with pytest.raises(CgroupError, match="reclaimed"):
        WorkloadCgroups(layout, "/a/b", reclaimed_subtree="/a")


def test_the_reclaimed_subtree_is_made_idle_and_the_runtime_subtree_is_not(tmp_path):
    """cpu.idle=1 on the reclaimed subtree itself (v1 cpu hierarchy): only there does the hogs'
    idleness compete at the root with the rest of the machine. A kernel without cpu.idle: the
    reclaimed pod's usual error."""
    root = _v1_tree(tmp_path / "cg")
    for name in ("hwagent.slice", "hwagent-reclaimed.slice"):
        (root / "cpu" / name).mkdir()
        (root / "cpu" / name / "cpu.idle").write_text("0\n")
    cg = WorkloadCgroups(detect(root), "/hwagent.slice", reclaimed_subtree="/hwagent-reclaimed.slice")
    cg.create(cg.path("podu1", "main"), lim())
    cg.create(cg.path("podu2", "main", reclaimed=True), lim())
    assert (root / "cpu/hwagent-reclaimed.slice/cpu.idle").read_text().strip() == "1"
    assert (root / "cpu/hwagent.slice/cpu.idle").read_text().strip() == "0"
    assert (root / "cpuset/hwagent-reclaimed.slice/podu2/main/cpuset.cpus").read_text() == "2-3"
    bare = _v1_tree(tmp_path / "cg2")
    cg2 = WorkloadCgroups(detect(bare), "/hwagent.slice", reclaimed_subtree="/hwagent-reclaimed.slice")
    with pytest.raises(CgroupSetupError, match="no cpu.idle"):
        cg2.create(cg2.path("podu2", "main", reclaimed=True), lim())
    cg2.create(cg2.path("podu1", "main"), lim())  # a shared pod does not need it


def test_a_restored_pod_is_found_in_whichever_subtree_holds_it(tmp_path):
    """A reclaimed pod started before the reclaimed subtree was configured (or after it was
    unset) still lives where it was made: restore finds it there, not an empty new place."""
    root = v2_tree(tmp_path / "cg")
    cg = WorkloadCgroups(detect(root), "/hwagent.slice", reclaimed_subtree="/hwagent-reclaimed.slice")
    assert cg.find_pod("podu1", reclaimed=True) == "/hwagent-reclaimed.slice/podu1"  # nowhere yet: its own place
    (root / "hwagent.slice/podu1/main").mkdir(parents=True)
    assert cg.find_pod("podu1", reclaimed=True) == "/hwagent.slice/podu1"
    (root / "hwagent-reclaimed.slice/podu2/main").mkdir(parents=True)
    assert cg.find_pod("podu2", reclaimed=False) == "/hwagent-reclaimed.slice/podu2"
    (root / "hwagent.slice/podu2").mkdir()
    assert cg.find_pod("podu2", reclaimed=False) == "/hwagent.slice/podu2"  # both: its class decides
