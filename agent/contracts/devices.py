"""Plain data of the device-plugin host: devices, allocations, run options.

No I/O and no gRPC here, only protobuf *messages* as values (an allocation
keeps the plugin's ``ContainerAllocateResponse`` because that is what a
container runtime eventually needs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.eventlog import get_logger

log = get_logger("hwagent.devicemanager")

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
#: the NUMA key under which devices without topology are recorded (kubelet: nodeWithoutTopology)
NO_TOPOLOGY = -1
API_VERSION = "v1beta1"
SUPPORTED_VERSIONS = ("v1beta1",)

#: "init" = regular init container (its devices are reusable by later containers
#: of the pod), "sidecar" = restartable init container, "app" = regular container
ContainerType = Literal["init", "sidecar", "app"]
CONTAINER_TYPES: tuple[str, ...] = ("init", "sidecar", "app")


@dataclass(frozen=True)
class Device:
    id: str
    healthy: bool
    #: NUMA nodes, sorted; () = the plugin reported no topology
    numa: tuple[int, ...] = ()

    @classmethod
    def from_pb(cls, d: pb.Device) -> Device:
        nodes = tuple(sorted({int(n.ID) for n in d.topology.nodes})) if d.HasField("topology") else ()
        # anything that is not exactly "Healthy" is unhealthy, as in the kubelet
        return cls(id=d.ID, healthy=d.health == HEALTHY, numa=nodes)


@dataclass(frozen=True)
class ResourceDevices:
    """The last full ListAndWatch snapshot of one resource (immutable, so the
    derived sets are computed once per snapshot)."""

    devices: Mapping[str, Device] = field(default_factory=dict)

    @classmethod
    def from_snapshot(cls, devices: Iterable[Device]) -> ResourceDevices:
        # a duplicated ID keeps its last entry (the kubelet would count it twice)
        return cls({d.id: d for d in devices})

    @cached_property
    def healthy(self) -> frozenset[str]:
        return frozenset(i for i, d in self.devices.items() if d.healthy)

    @cached_property
    def unhealthy(self) -> frozenset[str]:
        return frozenset(i for i, d in self.devices.items() if not d.healthy)

    @property
    def capacity(self) -> int:
        return len(self.devices)

    @cached_property
    def allocatable(self) -> int:
        return sum(1 for d in self.devices.values() if d.healthy)

    def all_unhealthy(self) -> ResourceDevices:
        return ResourceDevices({i: Device(i, False, d.numa) for i, d in self.devices.items()})


@dataclass(frozen=True)
class Allocation:
    """Devices of one resource held by one container."""

    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str
    container_type: str
    resource: str
    #: (device id, its NUMA nodes at allocation time), in allocation order
    devices: tuple[tuple[str, tuple[int, ...]], ...]
    #: serialized ContainerAllocateResponse; None while the plugin call is in flight
    response: bytes | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.pod_uid, self.container_name, self.resource)

    @property
    def device_ids(self) -> tuple[str, ...]:
        return tuple(i for i, _ in self.devices)

    @property
    def committed(self) -> bool:
        return self.response is not None

    def numa_nodes(self) -> tuple[int, ...]:
        return tuple(sorted({n for _, nodes in self.devices for n in nodes}))

    def devices_per_numa(self) -> dict[int, list[str]]:
        """The kubelet's DevicesPerNUMA view: a device on two nodes is listed under both."""
        out: dict[int, list[str]] = {}
        for dev, nodes in self.devices:
            for n in nodes or (NO_TOPOLOGY,):
                out.setdefault(n, []).append(dev)
        return out

    def response_pb(self) -> pb.ContainerAllocateResponse:
        msg = pb.ContainerAllocateResponse()
        if self.response:
            msg.ParseFromString(self.response)
        return msg


@dataclass(frozen=True)
class RunOptions:
    """What a runtime needs to start a container with its devices."""

    envs: dict[str, str] = field(default_factory=dict)
    mounts: tuple[pb.Mount, ...] = ()
    devices: tuple[pb.DeviceSpec, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()


def merge_run_options(responses: Iterable[tuple[str, pb.ContainerAllocateResponse]]) -> RunOptions:
    """Merge the plugin responses of a container's resources, first one wins.

    Collisions (same env key, mount or device container path, annotation key)
    keep the first value and log a differing one, as the kubelet does; CDI names
    are de-duplicated.
    """
    envs: dict[str, str] = {}
    annotations: dict[str, str] = {}
    mounts: dict[str, pb.Mount] = {}
    devices: dict[str, pb.DeviceSpec] = {}
    cdi: dict[str, None] = {}

    def put(table: dict, key: str, value, what: str, resource: str) -> None:
        if key in table:
            if table[key] != value:
                log.warning("run option conflict", kind=what, key=key, resource=resource, kept="first")
            return
        table[key] = value

    for resource, resp in responses:
        for k, v in sorted(resp.envs.items()):
            put(envs, k, v, "env", resource)
        for m in resp.mounts:
            put(mounts, m.container_path, m, "mount", resource)
        for d in resp.devices:
            put(devices, d.container_path, d, "device", resource)
        for k, v in sorted(resp.annotations.items()):
            put(annotations, k, v, "annotation", resource)
        for c in resp.cdi_devices:
            cdi.setdefault(c.name, None)
    return RunOptions(envs, tuple(mounts.values()), tuple(devices.values()), annotations, tuple(cdi))


@dataclass(frozen=True)
class ContainerRequest:
    """One container's device requests (resource name -> count)."""

    pod_uid: str
    container_name: str
    resources: Mapping[str, int]
    pod_namespace: str = ""
    pod_name: str = ""
    #: "init" (regular init container), "sidecar" (restartable init) or "app"
    container_type: str = "app"
    #: the topology manager's NUMA affinity for this container, if any
    hint: frozenset[int] | None = None
    #: resource -> the exact devices to take (admission carrying out its decision,
    #: ``DevicePlan``); they must still be free, else ABORTED. None: choose.
    devices: Mapping[str, tuple[str, ...]] | None = None


@dataclass(frozen=True)
class ContainerAllocation:
    pod_uid: str
    container_name: str
    allocations: tuple[Allocation, ...]

    def devices(self, resource: str) -> tuple[str, ...]:
        return next((a.device_ids for a in self.allocations if a.resource == resource), ())

    def run_options(self) -> RunOptions:
        return merge_run_options((a.resource, a.response_pb()) for a in self.allocations)


@dataclass(frozen=True)
class EndpointRecord:
    resource: str
    socket: str
    state: str  # "connected" or "stopped"
    stop_time: float | None = None  # wall-clock seconds


@dataclass(frozen=True)
class CheckpointData:
    allocations: tuple[Allocation, ...] = ()
    registered: dict[str, tuple[str, ...]] = field(default_factory=dict)
    devices: dict[str, tuple[Device, ...]] = field(default_factory=dict)
    endpoints: tuple[EndpointRecord, ...] = ()
    deleted: tuple[str, ...] = ()
