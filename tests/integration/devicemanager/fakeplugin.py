"""An independent device plugin for testing the host: written against the
generated v1beta1/pluginregistration stubs only (no hwagent code), with
configurable devices, options and failures, and a record of every call."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc


def dev(id: str, healthy: bool = True, numa: Iterable[int] | None = (0,)) -> pb.Device:
    d = pb.Device(ID=id, health="Healthy" if healthy else "Unhealthy")
    if numa is not None:
        d.topology.CopyFrom(pb.TopologyInfo(nodes=[pb.NUMANode(ID=n) for n in numa]))
    return d


async def _serve(socket_path: str, add_servicer: Callable[[Any, grpc.aio.Server], None], servicer: Any) -> grpc.aio.Server:
    """A gRPC server for ``servicer`` on a unix socket, started."""
    server = grpc.aio.server()
    add_servicer(servicer, server)
    server.add_insecure_port(f"unix:{socket_path}")
    await server.start()
    return server


async def _unserve(server: grpc.aio.Server | None, socket_path: str) -> None:
    """Stop the server at once and remove its socket (as a plugin that exits does)."""
    if server is not None:
        await server.stop(grace=None)
    try:
        os.unlink(socket_path)
    except FileNotFoundError:
        pass


@dataclass
class Failures:
    """Set a status code to make the next calls of that RPC fail."""

    options: grpc.StatusCode | None = None
    allocate: grpc.StatusCode | None = None
    preferred: grpc.StatusCode | None = None
    prestart: grpc.StatusCode | None = None
    allocate_delay: float = 0.0
    prestart_delay: float = 0.0


@dataclass
class Calls:
    allocate: list[list[str]] = field(default_factory=list)
    preferred: list[tuple[list[str], list[str], int]] = field(default_factory=list)
    prestart: list[list[str]] = field(default_factory=list)
    list_and_watch: int = 0
    notify: list[tuple[bool, str]] = field(default_factory=list)


class FakePlugin(pb_grpc.DevicePluginServicer):
    def __init__(
        self,
        socket_path: str,
        devices: Sequence[pb.Device],
        *,
        pre_start_required: bool = False,
        preferred: Callable[[list[str], list[str], int], list[str]] | None = None,
    ) -> None:
        self.socket_path = socket_path
        self.devices = list(devices)
        self.options = pb.DevicePluginOptions(
            pre_start_required=pre_start_required, get_preferred_allocation_available=preferred is not None
        )
        self.preferred_fn = preferred
        self.fail = Failures()
        self.calls = Calls()
        self._streams: list[asyncio.Queue] = []
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        self._server = await _serve(self.socket_path, pb_grpc.add_DevicePluginServicer_to_server, self)

    async def stop(self) -> None:
        for q in self._streams:
            q.put_nowait(None)
        await _unserve(self._server, self.socket_path)
        self._server = None

    def update(self, devices: Sequence[pb.Device]) -> None:
        self.devices = list(devices)
        for q in self._streams:
            q.put_nowait(list(self.devices))

    async def register(self, host_socket: str, resource: str, endpoint: str | None = None,
                       version: str = "v1beta1") -> None:
        async with grpc.aio.insecure_channel(f"unix://{host_socket}") as ch:
            await pb_grpc.RegistrationStub(ch).Register(
                pb.RegisterRequest(
                    version=version, resource_name=resource,
                    endpoint=os.path.basename(self.socket_path) if endpoint is None else endpoint,
                    options=self.options,
                ),
                timeout=10,
            )

    # ---- DevicePlugin service

    async def GetDevicePluginOptions(self, request, context):
        if self.fail.options:
            await context.abort(self.fail.options, "options failure injected")
        return self.options

    async def ListAndWatch(self, request, context):
        self.calls.list_and_watch += 1
        q: asyncio.Queue = asyncio.Queue()
        self._streams.append(q)
        try:
            yield pb.ListAndWatchResponse(devices=self.devices)
            while True:
                item = await q.get()
                if item is None:
                    return
                yield pb.ListAndWatchResponse(devices=item)
        finally:
            self._streams.remove(q)

    async def GetPreferredAllocation(self, request, context):
        r = request.container_requests[0]
        self.calls.preferred.append(
            (list(r.available_deviceIDs), list(r.must_include_deviceIDs), r.allocation_size)
        )
        if self.fail.preferred:
            await context.abort(self.fail.preferred, "preferred failure injected")
        ids = self.preferred_fn(list(r.available_deviceIDs), list(r.must_include_deviceIDs), r.allocation_size)
        return pb.PreferredAllocationResponse(
            container_responses=[pb.ContainerPreferredAllocationResponse(deviceIDs=ids)]
        )

    async def Allocate(self, request, context):
        ids = list(request.container_requests[0].devices_ids)
        self.calls.allocate.append(ids)
        if self.fail.allocate_delay:
            await asyncio.sleep(self.fail.allocate_delay)
        if self.fail.allocate:
            await context.abort(self.fail.allocate, "allocate failure injected")
        resp = pb.ContainerAllocateResponse(envs={"FAKE_DEVICES": ",".join(ids)})
        for i in ids:
            resp.devices.append(pb.DeviceSpec(container_path=f"/dev/{i}", host_path=f"/dev/{i}", permissions="rw"))
            resp.cdi_devices.append(pb.CDIDevice(name=f"example.com/fake={i}"))
        resp.mounts.append(pb.Mount(container_path="/fake", host_path="/tmp/fake", read_only=True))
        return pb.AllocateResponse(container_responses=[resp])

    async def PreStartContainer(self, request, context):
        self.calls.prestart.append(list(request.devices_ids))
        if self.fail.prestart_delay:
            await asyncio.sleep(self.fail.prestart_delay)
        if self.fail.prestart:
            await context.abort(self.fail.prestart, "prestart failure injected")
        return pb.PreStartContainerResponse()


class WatcherRegistration(reg_grpc.RegistrationServicer):
    """The plugin side of the plugin-watcher handshake, on its own socket."""

    def __init__(self, socket_path: str, info: reg_pb.PluginInfo, *, fail_notify: bool = False) -> None:
        self.socket_path = socket_path
        self.info = info
        self.fail_notify = fail_notify
        self.notified: list[tuple[bool, str]] = []
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        self._server = await _serve(self.socket_path, reg_grpc.add_RegistrationServicer_to_server, self)

    async def stop(self) -> None:
        await _unserve(self._server, self.socket_path)
        self._server = None

    async def GetInfo(self, request, context):
        return self.info

    async def NotifyRegistrationStatus(self, request, context):
        self.notified.append((request.plugin_registered, request.error))
        if self.fail_notify:
            await context.abort(grpc.StatusCode.INTERNAL, "notify failure injected")
        return reg_pb.RegistrationStatusResponse()
