"""What the runtime writes for memory and hugepages: the launch plan's limits and the
cgroup files per hierarchy (v1 ``hugetlb.<size>.limit_in_bytes``, v2 ``hugetlb.<size>.max``),
and the hybrid case where hugetlb lives only in the unified tree."""

from __future__ import annotations

from pathlib import Path

from agent.cgroups.detect import CgroupLayout
from agent.cgroups.limits import CgroupLimits, hugetlb_name
from agent.cgroups.workload import WorkloadCgroups, controller_files
from agent.contracts.pods import AdmittedPod, ContainerAssignment, ContainerSpec, PodSpec, Resources
from agent.cpuset import CPUSet
from agent.runtime.config import RuntimeConfig
from agent.runtime.plan import plan_container

MB = 1 << 20


def test_page_size_names() -> None:
    assert [hugetlb_name(x) for x in (2 * MB, 1 << 30, 64 << 10)] == ["2MB", "1GB", "64KB"]


def test_hugetlb_files_v1_and_v2() -> None:
    lim = CgroupLimits(cpus=CPUSet({0}), mems=CPUSet({0}), hugetlb=(("2MB", 64 * MB), ("1GB", 1 << 30)))
    assert controller_files(lim, "hugetlb", v2=False) == [
        ("hugetlb.2MB.limit_in_bytes", str(64 * MB)), ("hugetlb.1GB.limit_in_bytes", str(1 << 30))]
    assert controller_files(lim, "hugetlb", v2=True) == [("hugetlb.2MB.max", str(64 * MB)),
                                                        ("hugetlb.1GB.max", str(1 << 30))]
    assert controller_files(CgroupLimits(cpus=CPUSet({0}), mems=CPUSet({0})), "hugetlb", v2=True) == []


def test_the_plan_carries_memory_hugetlb_and_the_memory_nodes() -> None:
    c = ContainerSpec("main", ("run",), resources=Resources(
        memory_request_bytes=512 * MB, memory_limit_bytes=512 * MB, hugepages={"hugepages-2Mi": 64 * MB}))
    spec = PodSpec("p", "ns", "u1", (c,))
    a = ContainerAssignment("main", CPUSet.parse("2-3"), CPUSet({1}))
    plan = plan_container(AdmittedPod(spec, "dedicated", {"main": a}, 0.0), c, a, RuntimeConfig(),
                          all_mems=CPUSet.parse("0-1"), managed=(), node_memory=None)
    assert plan.limits.memory_limit == 512 * MB
    assert plan.limits.hugetlb == (("2MB", 64 * MB),)
    assert plan.limits.mems == CPUSet({1})
    assert {"memory", "hugetlb"} <= plan.limits.needs


def _hybrid(tmp_path: Path, v1: tuple[str, ...], unified: str) -> CgroupLayout:
    for c in v1:
        (tmp_path / c).mkdir()
    (tmp_path / "unified").mkdir()
    (tmp_path / "unified" / "cgroup.procs").write_text("")
    (tmp_path / "unified" / "cgroup.controllers").write_text(unified)
    return CgroupLayout("hybrid", tmp_path, frozenset(unified.split()))


def test_hybrid_without_v1_hugetlb_writes_the_limit_in_the_unified_tree(tmp_path: Path) -> None:
    layout = _hybrid(tmp_path, ("cpuset", "cpu", "memory"), "hugetlb")
    wc = WorkloadCgroups(layout, "/hw.slice")
    assert "hugetlb" in wc.available()
    lim = CgroupLimits(cpus=CPUSet({0}), mems=CPUSet({0}), memory_limit=64 * MB, hugetlb=(("2MB", 4 * MB),),
                       needs=frozenset({"cpuset", "cpu", "memory", "hugetlb"}))
    for f in ("cpuset.cpus", "cpuset.mems"):
        (tmp_path / "cpuset" / f).write_text("0\n")
    wc.create("/hw.slice/p/c", lim)
    assert (tmp_path / "unified/hw.slice/p/c/hugetlb.2MB.max").read_text() == str(4 * MB)
    assert (tmp_path / "unified/cgroup.subtree_control").read_text() == "+hugetlb"
    assert (tmp_path / "memory/hw.slice/p/c/memory.limit_in_bytes").read_text() == str(64 * MB)


def test_hybrid_leaves_the_unified_tree_alone_for_a_container_without_pages(tmp_path: Path) -> None:
    layout = _hybrid(tmp_path, ("cpuset", "cpu"), "hugetlb")
    for f in ("cpuset.cpus", "cpuset.mems"):
        (tmp_path / "cpuset" / f).write_text("0\n")
    WorkloadCgroups(layout, "/hw.slice").create("/hw.slice/p/c", CgroupLimits(
        cpus=CPUSet({0}), mems=CPUSet({0}), needs=frozenset({"cpuset", "cpu"})))
    assert not (tmp_path / "unified/cgroup.subtree_control").exists()
    assert not list((tmp_path / "unified/hw.slice/p/c").glob("hugetlb.*"))
