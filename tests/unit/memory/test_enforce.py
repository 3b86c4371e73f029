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


def test_page_sizes_a_container_did_not_ask_for_are_limited_to_zero() -> None:
    """As the kubelet: every page size the machine hands out gets a limit, 0 where the container
    asked for none, so a pod without hugepages cannot take the pages reserved for another."""
    GB = 1 << 30
    plain = ContainerSpec("main", ("run",), resources=Resources(memory_limit_bytes=64 * MB))
    spec = PodSpec("p", "ns", "u1", (plain,))
    a = ContainerAssignment("main", CPUSet.parse("0"), None)
    plan = plan_container(AdmittedPod(spec, "shared", {"main": a}, 0.0), plain, a, RuntimeConfig(),
                          all_mems=CPUSet.parse("0-1"), managed=(), node_memory=None,
                          hugepage_sizes=(2 * MB, GB))
    assert plan.limits.hugetlb == (("2MB", 0), ("1GB", 0))
    assert "hugetlb" in plan.limits.needs
    paged = ContainerSpec("main", ("run",), resources=Resources(
        memory_limit_bytes=64 * MB, hugepages={"hugepages-2Mi": 4 * MB}))
    spec = PodSpec("p", "ns", "u1", (paged,))
    plan = plan_container(AdmittedPod(spec, "shared", {"main": a}, 0.0), paged, a, RuntimeConfig(),
                          all_mems=CPUSet.parse("0-1"), managed=(), node_memory=None, hugepage_sizes=(GB,))
    assert plan.limits.hugetlb == (("2MB", 4 * MB), ("1GB", 0))
    # a machine with no page pool: nothing to limit, the controller is not needed
    plan = plan_container(AdmittedPod(spec, "shared", {"main": a}, 0.0), plain, a, RuntimeConfig(),
                          all_mems=CPUSet.parse("0-1"), managed=(), node_memory=None, hugepage_sizes=())
    assert plan.limits.hugetlb == () and "hugetlb" not in plan.limits.needs


def test_the_runtime_reads_the_page_sizes_with_a_pool_or_overcommit(tmp_path: Path) -> None:
    from agent.runtime.component import hugepage_sizes

    base = tmp_path / "kernel" / "mm" / "hugepages"
    for kb, nr, over in ((2048, 3, 0), (1048576, 0, 0), (64, 0, 2)):
        d = base / f"hugepages-{kb}kB"
        d.mkdir(parents=True)
        (d / "nr_hugepages").write_text(f"{nr}\n")
        (d / "nr_overcommit_hugepages").write_text(f"{over}\n")
    (base / "junk").mkdir()
    read = hugepage_sizes(str(tmp_path))
    assert sorted(read()) == [64 * 1024, 2 * MB]
    (base / "hugepages-1048576kB" / "nr_hugepages").write_text("1\n")
    assert sorted(read()) == [64 * 1024, 2 * MB, 1 << 30], "read again at each plan"
    assert hugepage_sizes(str(tmp_path / "none"))() == ()
