"""The device manager's contracts, as the kubelet's ``devicemanager/types.go``
names its ``Manager`` interface: what each caller may use, and nothing more.

- ``PluginEndpoint``: what the manager needs of one registered plugin
  (``endpoint.Endpoint`` over gRPC; a benchmark or test passes an in-process
  one to ``DeviceManager.attach``).
- ``PluginRegistry``: what the two registration paths (the Registration
  server, the plugin-watcher) call.

What other components ask of the host is in ``agent.contracts``
(``DeviceAllocator``, ``DeviceAllocations``); ``DeviceManager`` implements both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Protocol

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.contracts.devices import Device

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

