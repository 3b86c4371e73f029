"""Two fronts naming pods publish one POD_DIRECTORY: the earlier one's word wins, the later one adds."""

from __future__ import annotations

from pathlib import Path

from agent.config import load
from agent.contracts import POD_DIRECTORY, DaemonContext
from agent.contracts.poddirectory import ContainerIdentity, DeviceHolder, PodDirectory
from agent.contracts.pressure import Container
from agent.cpuset import CPUSet
from agent.poddirectories import JoinedPodDirectorySource, publish_pod_directory
from agent.status.views import Handles, pods_view


class _Source:
    def __init__(self, d: PodDirectory, error: str = "") -> None:
        self.current = d
        self.last_error = error

    def containers_for_pressure(self) -> list[Container]:
        return self.current.pressure_containers(CPUSet.parse("0-3"))


NRI = PodDirectory((ContainerIdentity("shop", "web-1", "nginx", "u1", "shared", "/kubepods/burstable/podu1/c1"),),
                   {}, {"u1": ("shop", "web-1")}, source="NRI runtime")
KUBELET = PodDirectory(
    (ContainerIdentity("", "u1", "", "u1", "shared", "/kubepods/burstable/podu1/c1"),  # the walk, unnamed
     ContainerIdentity("kube-system", "dns", "coredns", "u2", "shared", "/kubepods/burstable/podu2/c2")),
    {("example.com/gpu", "g0"): DeviceHolder("shop", "web-1", "nginx")}, {"u2": ("kube-system", "dns")},
    source="kubelet pod-resources")


def _ctx() -> DaemonContext:
    return DaemonContext(load(None), Path("/nonexistent"), None, mode="kubelet")  # type: ignore[arg-type]


def test_the_first_publisher_is_published_alone() -> None:
    ctx, nri = _ctx(), _Source(NRI)
    assert publish_pod_directory(ctx, nri) is nri and ctx.lookup(POD_DIRECTORY) is nri


def test_a_second_publisher_joins_the_first_whose_names_win() -> None:
    ctx = _ctx()
    publish_pod_directory(ctx, _Source(NRI))
    kubelet = _Source(KUBELET, error="podresources unavailable")
    joined = publish_pod_directory(ctx, kubelet)
    assert isinstance(joined, JoinedPodDirectorySource) and ctx.lookup(POD_DIRECTORY) is joined
    d = joined.current
    assert [(c.namespace, c.pod, c.container) for c in d.containers] == [
        ("shop", "web-1", "nginx"), ("kube-system", "dns", "coredns")]
    assert d.holder_of("example.com/gpu", "g0") == DeviceHolder("shop", "web-1", "nginx")
    assert d.pods == {"u1": ("shop", "web-1"), "u2": ("kube-system", "dns")}
    assert d.source == "NRI runtime + kubelet pod-resources" and joined.last_error == "podresources unavailable"
    assert joined.current is d  # neither side moved: no rebuild
    assert [c.container_name for c in joined.containers_for_pressure()] == ["nginx", "coredns"]
    listed, _ = pods_view(Handles(pods=joined))
    assert [(p["name"], p["devices"]) for p in listed] == [("dns", []), ("web-1", ["example.com/gpu/g0"])]
    kubelet.current = PodDirectory(source="kubelet pod-resources")
    assert [c.pod for c in joined.current.containers] == ["web-1"]  # the later side's change is seen


class _NoAdmittedPods:
    def listed(self) -> list[object]:
        return []


def test_standalone_status_lists_the_directory_pods_beside_the_admitted_ones() -> None:
    """Standalone with the NRI front: the runtime's pods are listed after the registry's (none here);
    before, the registry alone answered and the runtime's pods were missing."""
    listed, source = pods_view(Handles(workloads=_NoAdmittedPods(), pods=_Source(NRI)))  # type: ignore[arg-type]
    assert [(p["namespace"], p["name"], p["qos"], p["containers"]) for p in listed] == [
        ("shop", "web-1", "shared", ["nginx"])]
    assert source.endswith("; NRI runtime")
