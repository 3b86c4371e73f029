"""The NRI pod directory: runtime messages in, the same PodDirectory value kubelet mode publishes out."""

from __future__ import annotations

import pytest

from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.cpuset import CPUSet
from agent.nri.cgpath import cgroupfs_path, slice_path
from agent.nri.directory import NriPodDirectorySource, build_directory
from agent.nri.view import NodeView


def _pod(pid: str, name: str, *, ns: str = "default", parent: str = "", annotations: dict[str, str] | None = None,
         sandbox_cgroup: str = "") -> nri.PodSandbox:
    return nri.PodSandbox(id=pid, name=name, namespace=ns, uid=f"uid-{name}", annotations=annotations or {},
                          linux=nri.LinuxPodSandbox(cgroup_parent=parent, cgroups_path=sandbox_cgroup), pid=100)


def _ctr(cid: str, pod_id: str, name: str, cgroup: str, *, shares: int = 0, quota: int = 0, period: int = 0,
         cpus: str = "", pid: int = 0) -> nri.Container:
    cpu = nri.LinuxCPU(cpus=cpus)
    if shares:
        cpu.shares.value = shares
    if quota:
        cpu.quota.value = quota
    if period:
        cpu.period.value = period
    return nri.Container(id=cid, pod_sandbox_id=pod_id, name=name, pid=pid,
                         linux=nri.LinuxContainer(cgroups_path=cgroup, resources=nri.LinuxResources(cpu=cpu)))


@pytest.mark.parametrize(("runtime", "path"), [
    ("/kubepods/burstable/podabc/0123", "/kubepods/burstable/podabc/0123"),
    ("kubepods/podabc/0123", "/kubepods/podabc/0123"),
    ("kubepods-besteffort-pod1_2.slice:cri-containerd:0123",
     "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1_2.slice/cri-containerd-0123.scope"),
    ("kubepods-pod1_2.slice:crio:0123", "/kubepods.slice/kubepods-pod1_2.slice/crio-0123.scope"),
    ("system.slice:docker:abc", "/system.slice/docker-abc.scope"),
    (":cri-containerd:abc", "/cri-containerd-abc.scope"),
    ("", ""),
])
def test_runtime_cgroup_names_become_cgroupfs_paths(runtime: str, path: str) -> None:
    assert cgroupfs_path(runtime) == path


@pytest.mark.parametrize("bad", ["/a/../b", "a-.slice:x:y"])
def test_a_cgroup_name_that_escapes_or_is_malformed_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        cgroupfs_path(bad)


def test_slice_nesting_follows_systemd() -> None:
    assert slice_path("-.slice") == "/"
    assert slice_path("a-b-c.slice") == "/a.slice/a-b.slice/a-b-c.slice"


def _view() -> NodeView:
    v = NodeView()
    v.synchronize(
        [_pod("p1", "web", parent="/kubepods/pod1", sandbox_cgroup="/kubepods/pod1/sb1"),
         _pod("p2", "batch", ns="jobs", parent="/kubepods/besteffort/pod2"),
         _pod("p3", "api", parent="/kubepods/burstable/pod3",
              annotations={"katalyst.kubewharf.io/qos_level": "dedicated_cores"}),
         _pod("p4", "frac", parent="/kubepods/pod4")],
        [_ctr("c1", "p1", "main", "/kubepods/pod1/c1", shares=2048, quota=200000, period=100000, cpus="2-3",
              pid=4242),
         _ctr("c2", "p2", "work", "/kubepods/besteffort/pod2/c2"),
         _ctr("c3", "p3", "srv", "/kubepods/burstable/pod3/c3", shares=102),
         _ctr("c4", "p4", "half", "/kubepods/pod4/c4", shares=512, quota=50000, period=100000),
         _ctr("c9", "gone", "orphan", "/kubepods/pod9/c9")])
    return v


def test_every_container_is_named_with_namespace_pod_container_and_qos() -> None:
    d = build_directory(_view(), source="NRI test")
    named = {(c.namespace, c.pod, c.container, c.qos, c.cgroup) for c in d.containers}
    assert named == {
        ("default", "web", "", "dedicated", "/kubepods/pod1/sb1"),  # the sandbox, with its container's level
        ("default", "web", "main", "dedicated", "/kubepods/pod1/c1"),  # Guaranteed, 2 whole CPUs
        ("jobs", "batch", "work", "reclaimed", "/kubepods/besteffort/pod2/c2"),
        ("default", "api", "srv", "dedicated", "/kubepods/burstable/pod3/c3"),  # Katalyst's annotation wins
        ("default", "frac", "half", "shared", "/kubepods/pod4/c4"),  # Guaranteed but half a CPU
    }  # c9's pod was never reported: no names to give it, left out
    assert d.container_of("/kubepods/pod1/c1/sub").container == "main"  # type: ignore[union-attr]
    assert d.container_of("/kubepods/pod1/c1").cpus == CPUSet.parse("2-3")  # type: ignore[union-attr]
    assert d.pods["uid-batch"] == ("jobs", "batch")
    assert d.source == "NRI test"


def test_a_placement_word_on_qos_wins_over_the_classification() -> None:
    d = build_directory(_view(), qos_of=lambda pod, ctr: "system_cores" if ctr and ctr.name == "work" else None)
    assert {c.container: c.qos for c in d.containers}["work"] == "system"


def test_the_source_rebuilds_after_an_event_and_a_removed_pod_is_gone() -> None:
    v = _view()
    src = NriPodDirectorySource(v, CPUSet.parse("0-7"), source="NRI test")
    first = src.current
    assert src.current is first  # nothing changed: no rebuild
    v.pod_event(nri.REMOVE_POD_SANDBOX, _pod("p2", "batch", ns="jobs"))
    assert "batch" not in {c.pod for c in src.current.containers}
    assert src.containers_for_pressure() == src.containers_for_pressure()  # translated once, a copy each time
    pressure = {c.container_name: c for c in src.containers_for_pressure()}
    assert pressure["main"].cpuset == CPUSet.parse("2-3") and pressure["half"].cpuset == CPUSet.parse("0-7")
    assert (pressure["main"].pod_namespace, pressure["main"].pod_name, pressure["main"].qos_level) == (
        "default", "web", "dedicated")


def test_a_later_event_without_pid_or_cgroup_keeps_what_an_earlier_one_said() -> None:
    v = NodeView()
    pod = _pod("p1", "web", parent="/kubepods/pod1")
    v.container_event(nri.START_CONTAINER, pod, _ctr("c1", "p1", "main", "/kubepods/pod1/c1", pid=77))
    v.container_event(nri.STOP_CONTAINER, pod, nri.Container(id="c1", pod_sandbox_id="p1", name="main"))
    c = v.containers["c1"]
    assert (c.state, c.pid, c.cgroups_path) == ("stopped", 77, "/kubepods/pod1/c1")


def test_an_opted_out_pod_is_still_named_with_its_class() -> None:
    v = NodeView()
    v.synchronize([_pod("p1", "raw", parent="/kubepods/besteffort/pod1", annotations={"hwagent.io/nri": "ignore"})],
                  [_ctr("c1", "p1", "main", "/kubepods/besteffort/pod1/c1")])
    assert [(c.container, c.qos) for c in build_directory(v).containers] == [("main", "reclaimed")]
