"""The host's gRPC client of one registered device plugin (one socket)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Sequence

import grpc

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from agent.contracts.devices import Device
from agent.devicemanager.selection import AllocationError
from agent.eventlog import get_logger
from agent.limits import LimitError, check_name
from agent.tasks import cancel_and_wait
from agent.unixsock import dial

log = get_logger("hwagent.devicemanager")


class EndpointStopped(AllocationError):
    def __init__(self, socket: str) -> None:
        super().__init__(f"endpoint {socket} has been stopped", "UNAVAILABLE")


class Endpoint:
    """A connected plugin: options, the ListAndWatch stream, and the calls.

    ``on_snapshot(endpoint, devices)`` runs for every ListAndWatch message;
    ``on_closed(endpoint, reason)`` once, when the stream ends for any reason.
    The host never redials: a plugin whose stream broke must register again.
    """

    def __init__(self, resource: str, socket: str, *, dial_timeout: float, call_timeout: float) -> None:
        self.resource = resource
        self.socket = socket
        self.options = pb.DevicePluginOptions()
        self.connected_at = time.time()
        self.stop_time: float | None = None
        self._dial_timeout = dial_timeout
        self._call_timeout = call_timeout
        self._channel: grpc.aio.Channel | None = None
        self._stub: pb_grpc.DevicePluginStub | None = None
        self._task: asyncio.Task | None = None

    @property
    def stopped(self) -> bool:
        return self.stop_time is not None

    async def connect(self) -> None:
        """Dial the socket and fetch the plugin's options; raises on failure."""
        # a third-party plugin's device list may be long: its answers get 64 MiB
        self._channel = dial(self.socket, "deviceplugin", aio=True, receive=64 << 20,
                             options=[("grpc.enable_retries", 0)])
        try:
            await asyncio.wait_for(self._channel.channel_ready(), self._dial_timeout)
            self._stub = pb_grpc.DevicePluginStub(self._channel)
            self.options = await self._stub.GetDevicePluginOptions(pb.Empty(), timeout=self._dial_timeout)
        except BaseException:
            await self._channel.close()
            self._channel = None
            raise

    def run(
        self,
        on_snapshot: Callable[[Endpoint, list[Device]], None],
        on_closed: Callable[[Endpoint, str], Awaitable[None] | None],
    ) -> None:
        async def consume() -> None:
            reason = "stream ended"
            try:
                assert self._stub is not None
                async for resp in self._stub.ListAndWatch(pb.Empty()):
                    on_snapshot(self, self._bounded([Device.from_pb(d) for d in resp.devices]))
            except asyncio.CancelledError:
                reason = "stopped by host"
                raise
            except grpc.aio.AioRpcError as e:
                reason = f"{e.code().name}: {e.details()}"
            finally:
                self.stop_time = self.stop_time or time.time()
                if reason != "stopped by host":
                    result = on_closed(self, reason)
                    if asyncio.iscoroutine(result):
                        await result

        self._task = asyncio.get_running_loop().create_task(consume(), name=f"listandwatch:{self.socket}")

    def _bounded(self, devices: list[Device]) -> list[Device]:
        """Devices whose id is over agent.limits' bound are left out (and logged):
        they would be stored in the checkpoint and echoed to every client."""
        kept = []
        for d in devices:
            try:
                check_name("device_id", d.id)
            except LimitError as e:
                log.warning("device ignored", resource=self.resource, socket=self.socket, error=str(e))
                continue
            kept.append(d)
        return kept

    async def close(self) -> None:
        """Stop the stream (no on_closed callback) and the channel."""
        self.stop_time = self.stop_time or time.time()
        task, self._task = self._task, None
        if task is not asyncio.current_task():
            await cancel_and_wait(task)
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    def _live_stub(self) -> pb_grpc.DevicePluginStub:
        if self.stopped or self._stub is None:
            raise EndpointStopped(self.socket)
        return self._stub

    async def get_preferred_allocation(
        self, available: Collection[str], must_include: Collection[str], size: int
    ) -> list[str]:
        """The plugin's advisory choice; AllocationError(UNAVAILABLE) when the call fails."""
        req = pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=sorted(available),
                    must_include_deviceIDs=sorted(must_include),
                    allocation_size=size,
                )
            ]
        )
        try:
            resp = await self._live_stub().GetPreferredAllocation(req, timeout=self._call_timeout)
        except grpc.aio.AioRpcError as e:
            raise self._failed("GetPreferredAllocation", e, "UNAVAILABLE") from None
        if not resp.container_responses:
            return []
        return list(resp.container_responses[0].deviceIDs)

    async def allocate(self, device_ids: Sequence[str]) -> pb.ContainerAllocateResponse:
        """The plugin's Allocate for one container. A plugin refusing the ids
        (INVALID_ARGUMENT) is FAILED_PRECONDITION to our caller; any other
        failure UNAVAILABLE."""
        req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=list(device_ids))])
        try:
            resp = await self._live_stub().Allocate(req, timeout=self._call_timeout)
        except grpc.aio.AioRpcError as e:
            refused = e.code() == grpc.StatusCode.INVALID_ARGUMENT
            raise self._failed("Allocate", e, "FAILED_PRECONDITION" if refused else "UNAVAILABLE") from None
        if not resp.container_responses:
            raise AllocationError(f"no containers return in allocation response {resp}", "INTERNAL")
        return resp.container_responses[0]

    async def pre_start_container(self, device_ids: Sequence[str], timeout: float) -> None:
        """PreStartContainer; a timeout stays DEADLINE_EXCEEDED, other failures UNAVAILABLE."""
        try:
            await self._live_stub().PreStartContainer(
                pb.PreStartContainerRequest(devices_ids=list(device_ids)), timeout=timeout
            )
        except grpc.aio.AioRpcError as e:
            late = e.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            raise self._failed("PreStartContainer", e, "DEADLINE_EXCEEDED" if late else "UNAVAILABLE") from None

    def _failed(self, call: str, e: grpc.aio.AioRpcError, code: str) -> AllocationError:
        return AllocationError(
            f"device plugin {call} failed for {self.resource}: {e.code().name}: {e.details()}", code
        )
