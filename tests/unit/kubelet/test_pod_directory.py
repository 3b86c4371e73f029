"""The pod directory's join of the kubepods tree, the log layout, pod-resources and CPU records (fixture trees)."""

from __future__ import annotations

from pathlib import Path

from agent.cgroups.kubepods import parse_pod_dir, walk_kubepods
from agent.cpuset import CPUSet
from agent.kubelet.client import from_list_response
from agent.kubelet.logs import read_log_names
from agent.contracts.poddirectory import ContainerResources, PodResources, PodResourcesSnapshot
from agent.kubelet.resolve import CPUAllocation, LogNames, build_directory
from agent.api.podresources.v1 import api_pb2 as pr

A = "a" * 64
B = "b" * 64
C = "c" * 64
UID1 = "11111111-2222-3333-4444-555555555555"
UID2 = "66666666-7777-8888-9999-000000000000"


def _mk(root: Path, rel: str, cpus: str | None = None) -> None:
    d = root / rel.lstrip("/")
    d.mkdir(parents=True)
    if cpus is not None:
        (d / "cpuset.cpus").write_text(cpus + "\n")


def test_walk_reads_both_drivers_and_qos_classes(tmp_path):
    _mk(tmp_path, f"/kubepods/pod{UID1}/{A}", "2-3")  # guaranteed, cgroupfs, containerd
    _mk(tmp_path, f"/kubepods/besteffort/pod{UID2}/crio-{B}")
    _mk(tmp_path, f"/kubepods/besteffort/pod{UID2}/not-a-container")
    u = UID1.replace("-", "_")
    _mk(tmp_path, f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{C}.scope")
    found = {(c.pod_uid, c.container_id, c.qos_class, c.cpus) for c in walk_kubepods(tmp_path)}
    assert found == {(UID1, A, "guaranteed", CPUSet.parse("2-3")), (UID2, B, "besteffort", None),
                     (UID1, C, "burstable", None)}


def test_walk_under_a_cgroup_root_and_missing_tree(tmp_path):
    _mk(tmp_path, f"/custom/kubepods/burstable/pod{UID1}/{A}")
    assert walk_kubepods(tmp_path) == []
    (c,) = walk_kubepods(tmp_path, "/custom")
    assert c.path == f"/custom/kubepods/burstable/pod{UID1}/{A}" and c.qos_class == "burstable"
    assert walk_kubepods(tmp_path / "absent", "/") == []


def test_parse_pod_dir_rejects_other_names():
    assert parse_pod_dir("burstable", "podabc") is None  # too short to be a uid
    assert parse_pod_dir("x", "kubepods-pod1234_5678_9abc.slice") == ("1234-5678-9abc", "guaranteed")


def test_log_layout_names_pods_and_containers(tmp_path):
    (tmp_path / "pods" / f"ns1_web-0_{UID1}").mkdir(parents=True)
    (tmp_path / "pods" / "garbage").mkdir()
    (tmp_path / "containers").mkdir()
    (tmp_path / "containers" / f"web-0_ns1_nginx-proxy-{A}.log").write_text("")
    (tmp_path / "containers" / "web-0_ns1_short-abc.log").write_text("")
    names = read_log_names(tmp_path)
    assert names.pods == {UID1: ("ns1", "web-0")}
    assert names.containers == {A: ("ns1", "web-0", "nginx-proxy")}
    assert read_log_names(tmp_path / "absent").pods == {}


def test_join_names_qos_devices_and_exclusive_cpus(tmp_path):
    _mk(tmp_path, f"/kubepods/pod{UID1}/{A}", "2-3")     # named by nothing but its exclusive CPUs
    _mk(tmp_path, f"/kubepods/pod{UID1}/{B}", "0-7")     # the sandbox: nothing names it
    _mk(tmp_path, f"/kubepods/besteffort/pod{UID2}/{C}")
    logs = LogNames({UID1: ("prod", "db-0"), UID2: ("batch", "job-1")}, {C: ("batch", "job-1", "worker")})
    snap = PodResourcesSnapshot((
        PodResources("prod", "db-0", (ContainerResources("postgres", {"nvidia.com/gpu": ("GPU-1",)},
                                                         CPUSet.parse("2-3")),)),
        PodResources("batch", "job-1", (ContainerResources("worker"),)),
    ))
    d = build_directory(walk_kubepods(tmp_path), snap, logs)
    got = {c.cgroup.rsplit("/", 1)[1]: (c.namespace, c.pod, c.container, c.qos) for c in d.containers}
    assert got == {A: ("prod", "db-0", "postgres", "dedicated"), B: ("prod", "db-0", "", "shared"),
                   C: ("batch", "job-1", "worker", "reclaimed")}
    assert d.holder_of("nvidia.com/gpu", "GPU-1").container == "postgres"
    # a thread in a sub-cgroup of the container is the container's
    assert d.container_of(f"/kubepods/besteffort/pod{UID2}/{C}/sub").container == "worker"
    assert d.container_of("/system.slice/x") is None and d.container_of("(other)") is None


def test_cpu_policy_names_win_and_give_katalyst_qos(tmp_path):
    _mk(tmp_path, f"/kubepods/burstable/pod{UID1}/{A}")
    alloc = CPUAllocation(UID1, "ns", "api-7", "app", "reclaimed_cores", f"/kubepods/burstable/pod{UID1}/{A}")
    (c,) = build_directory(walk_kubepods(tmp_path), None, None, [alloc]).containers
    assert (c.namespace, c.pod, c.container, c.qos) == ("ns", "api-7", "app", "reclaimed")


def test_unknown_pod_keeps_its_uid_never_a_path(tmp_path):
    _mk(tmp_path, f"/kubepods/burstable/pod{UID1}/{A}")
    (c,) = build_directory(walk_kubepods(tmp_path), None).containers
    assert (c.namespace, c.pod, c.container) == ("", UID1, "")


def test_list_response_to_snapshot_merges_numa_duplicates():
    resp = pr.ListPodResourcesResponse(pod_resources=[pr.PodResources(name="p", namespace="n", containers=[
        pr.ContainerResources(name="c", cpu_ids=[4, 5], devices=[
            pr.ContainerDevices(resource_name="r", device_ids=["d0"]),
            pr.ContainerDevices(resource_name="r", device_ids=["d0", "d1"])])])])
    alloc = pr.AllocatableResourcesResponse(devices=[pr.ContainerDevices(resource_name="r", device_ids=["d1", "d0"])],
                                            cpu_ids=[0, 1])
    snap = from_list_response(resp, alloc)
    (c,) = snap.pods[0].containers
    assert c.devices == {"r": ("d0", "d1")} and c.cpu_ids == CPUSet.parse("4-5")
    assert snap.allocatable_devices == {"r": ("d0", "d1")} and snap.allocatable_cpus == CPUSet.parse("0-1")
