"""The device manager's contracts, as the kubelet's ``devicemanager/types.go``
names its ``Manager`` interface: what each caller may use, and nothing more.

- ``PluginEndpoint``: what the manager needs of one registered plugin
  (``endpoint.Endpoint`` over gRPC; a benchmark or test passes an in-process
  one to ``DeviceManager.attach``).
- ``PluginRegistry``: what the two registration paths (the Registration
  server, the plugin-watcher) call.
- ``DeviceManagerAPI``: what the component, the pod-resources server, the
  status views and admission call; ``DeviceManager`` is the implementation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.devicemanager.model import Allocation, Device, ResourceDevices, RunOptions

if TYPE_CHECKING:
    from agent.devicemanager.checkpoint import CheckpointData, EndpointRecord
    from agent.devicemanager.hints import TopologyHint
    from agent.devicemanager.manager import ContainerAllocation, ContainerRequest


class PluginEndpoint(Protocol):
    """One plugin socket of a resource. Its calls raise ``AllocationError``
    (with the gRPC status our caller gets), never a raw RPC error."""

    resource: str
    socket: str
    options: pb.DevicePluginOptions
    stop_time: float | None

    @property
    def stopped(self) -> bool: ...

    def run(
        self,
        on_snapshot: Callable[[PluginEndpoint, list[Device]], None],
        on_closed: Callable[[PluginEndpoint, str], Awaitable[None] | None],
    ) -> None: ...

    async def get_preferred_allocation(
        self, available: Collection[str], must_include: Collection[str], size: int
    ) -> list[str]: ...

    async def allocate(self, device_ids: Sequence[str]) -> pb.ContainerAllocateResponse: ...

    async def pre_start_container(self, device_ids: Sequence[str], timeout: float) -> None: ...

    async def close(self) -> None: ...


class PluginRegistry(Protocol):
    """Where a plugin is registered and deregistered (socket by socket)."""

    async def register(self, resource: str, socket: str) -> object: ...

    async def deregister(self, resource: str, socket: str) -> None: ...


class DeviceManagerAPI(PluginRegistry, Protocol):
    """The device-plugin host as its callers see it."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def allocate(self, req: ContainerRequest) -> ContainerAllocation: ...

    async def pre_start(self, pod_uid: str, container_name: str) -> None: ...

    def topology_hints(
        self, pod_uid: str, container_name: str, requests: Mapping[str, int]
    ) -> dict[str, list[TopologyHint] | None]: ...

    def pod_topology_hints(
        self, pod_uid: str, requests: Mapping[str, int]
    ) -> dict[str, list[TopologyHint] | None]: ...

    def release_pod(self, pod_uid: str) -> None: ...

    def allocations(self) -> list[Allocation]: ...

    def container_allocations(self, pod_uid: str) -> dict[str, list[Allocation]]: ...

    def run_options(self, pod_uid: str, container_name: str) -> RunOptions | None: ...

    def allocatable_devices(self) -> dict[str, list[Device]]: ...

    def capacity(self) -> tuple[dict[str, int], dict[str, int], list[str]]: ...

    def resources(self) -> dict[str, ResourceDevices]: ...

    def endpoints(self) -> list[EndpointRecord]: ...

    def snapshot(self) -> CheckpointData: ...

    async def flush_checkpoint(self) -> None: ...
