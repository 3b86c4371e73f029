"""What hwagent knows about the kubelet's pods: plain values, no I/O.

A ``PodDirectory`` is one immutable snapshot, rebuilt on every refresh and
swapped in whole, so readers on other threads (the pressure tick, the metrics
scrape) always see a consistent picture without a lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.cgroups.ancestry import nearest_ancestor
from agent.contracts.pressure import Container
from agent.cpuset import CPUSet

__all__ = [
    "ContainerIdentity",
    "ContainerResources",
    "PodResources",
    "PodResourcesSnapshot",
    "PodDirectory",
    "DeviceHolder",
]


@dataclass(frozen=True)
class ContainerResources:
    """One container as the pod-resources API lists it."""

    name: str
    #: resource name -> device ids
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    cpu_ids: CPUSet = field(default_factory=CPUSet)


@dataclass(frozen=True)
class PodResources:
    namespace: str
    name: str
    containers: tuple[ContainerResources, ...] = ()


@dataclass(frozen=True)
class PodResourcesSnapshot:
    """One List (and GetAllocatableResources) answer of the kubelet."""

    pods: tuple[PodResources, ...] = ()
    #: resource name -> allocatable device ids
    allocatable_devices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    allocatable_cpus: CPUSet = field(default_factory=CPUSet)


@dataclass(frozen=True)
class ContainerIdentity:
    """Who a container cgroup belongs to, as the labels of its signals say it."""

    namespace: str
    pod: str
    container: str
    pod_uid: str
    #: Katalyst-style QoS level: "dedicated", "shared", "reclaimed" (or "" when unknown)
    qos: str
    #: the container's cgroup, relative to the controller root
    cgroup: str
    cpus: CPUSet | None = None
    #: the uid it runs as, where its front knows it for certain (a Slurm job's, as Slurm says it):
    #: the one user besides root who may see it listed (``hwagent ps``); None = root only
    owner_uid: int | None = None

    @property
    def labels(self) -> tuple[str, str, str, str]:
        return (self.namespace, self.pod, self.container, self.qos)


@dataclass(frozen=True)
class DeviceHolder:
    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class PodDirectory:
    """cgroup -> container identity and device -> holder, for one moment."""

    containers: tuple[ContainerIdentity, ...] = ()
    #: (resource, device id) -> the container holding it
    devices: Mapping[tuple[str, str], DeviceHolder] = field(default_factory=dict)
    #: pod uid -> (namespace, name), for pods known by name
    pods: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: where the names came from, for status
    source: str = ""
    #: monotonic time of the refresh that built it
    at: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_cgroup", {c.cgroup: c for c in self.containers})

    def container_of(self, cgroup: str) -> ContainerIdentity | None:
        """The container whose cgroup is ``cgroup`` or an ancestor of it
        (a runtime may put a container's threads in sub-cgroups)."""
        by: dict[str, ContainerIdentity] = self._by_cgroup  # type: ignore[attr-defined]
        return nearest_ancestor(by, cgroup)

    def holder_of(self, resource: str, device_id: str) -> DeviceHolder | None:
        return self.devices.get((resource, device_id))

    def pressure_containers(self, node_cpus: CPUSet) -> list[Container]:
        """The containers as the pressure evaluator's values (a container without a cpuset of its
        own may run on any of ``node_cpus``); one translation for every source of names."""
        return [
            Container(pod_uid=c.pod_uid, container_name=c.container or c.cgroup.rsplit("/", 1)[-1], qos_level=c.qos,
                      cpuset=c.cpus if c.cpus else node_cpus, cgroup_path=c.cgroup,
                      pod_namespace=c.namespace, pod_name=c.pod)
            for c in self.containers
        ]
