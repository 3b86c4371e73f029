"""A minimal kubelet for tests: serves Registration on a unix socket and, like
the current kubelet, dials the plugin back during Register (GetDevicePluginOptions),
then keeps a ListAndWatch stream open and records every snapshot."""

from __future__ import annotations

import asyncio

from dataclasses import dataclass, field
from pathlib import Path

import grpc

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc


async def registrations_reaching(registrar, n: int, timeout_s: float = 60.0) -> int:
    """A registrar's count once it reaches n (or the timeout): the registrar counts a
    registration when the kubelet's answer arrives, which is after this kubelet has
    dialled the plugin back, so a test that saw the dial-back must still wait for it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while registrar.registrations < n and loop.time() < deadline:
        await asyncio.sleep(0.01)
    return registrar.registrations


@dataclass
class Endpoint:
    resource: str
    socket: Path
    options: pb.DevicePluginOptions
    channel: grpc.aio.Channel
    stub: pb_grpc.DevicePluginStub
    snapshots: list[dict[str, tuple[str, tuple[int, ...]]]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None

    def latest(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        return self.snapshots[-1] if self.snapshots else {}

    async def wait_for(self, pred, timeout: float = 10.0) -> dict[str, tuple[str, tuple[int, ...]]]:
        """Wait until a snapshot satisfies pred (checks the latest first)."""
        async def loop():
            while True:
                if self.snapshots and pred(self.latest()):
                    return self.latest()
                self.changed.clear()
                await self.changed.wait()
        return await asyncio.wait_for(loop(), timeout)


class KubeletStub(pb_grpc.RegistrationServicer):
    def __init__(self, socket_path: Path) -> None:
        self.socket_path = Path(socket_path)
        self.dir = self.socket_path.parent
        self.requests: list[pb.RegisterRequest] = []
        self.endpoints: dict[str, Endpoint] = {}
        self.registered = asyncio.Condition()
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.socket_path.exists():
            self.socket_path.unlink()
        self._server = grpc.aio.server()
        pb_grpc.add_RegistrationServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix://{self.socket_path}")
        await self._server.start()

    async def stop(self, cleanup_plugin_sockets: bool = False) -> None:
        for ep in self.endpoints.values():
            if ep.task:
                ep.task.cancel()
            await ep.channel.close()
        self.endpoints.clear()
        if self._server:
            await self._server.stop(0)
            self._server = None
        if self.socket_path.exists():
            self.socket_path.unlink()
        if cleanup_plugin_sockets:  # what a restarting kubelet does to the device-plugins dir
            for p in self.dir.iterdir():
                if p.is_socket():
                    p.unlink()

    async def Register(self, request: pb.RegisterRequest, context) -> pb.Empty:
        self.requests.append(request)
        if request.version != "v1beta1":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unsupported version {request.version!r}")
        sock = self.dir / request.endpoint
        ch = grpc.aio.insecure_channel(f"unix://{sock}")
        stub = pb_grpc.DevicePluginStub(ch)
        try:
            opts = await stub.GetDevicePluginOptions(pb.Empty(), timeout=5)
        except grpc.aio.AioRpcError as e:
            await ch.close()
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"cannot dial plugin: {e.details()}")
        old = self.endpoints.pop(request.resource_name, None)
        if old and old.task:
            old.task.cancel()
        ep = Endpoint(request.resource_name, sock, opts, ch, stub)
        ep.task = asyncio.get_running_loop().create_task(self._watch(ep))
        self.endpoints[request.resource_name] = ep
        async with self.registered:
            self.registered.notify_all()
        return pb.Empty()

    async def _watch(self, ep: Endpoint) -> None:
        try:
            async for resp in ep.stub.ListAndWatch(pb.Empty()):
                ep.snapshots.append({d.ID: (d.health, tuple(n.ID for n in d.topology.nodes)) for d in resp.devices})
                ep.changed.set()
        except (grpc.aio.AioRpcError, asyncio.CancelledError):
            pass

    async def endpoint(self, resource: str, timeout: float = 10.0, *, after: int = 0) -> Endpoint:
        """Wait for a registration of ``resource`` (the n-th one when after=n)."""
        def done() -> bool:
            return sum(1 for r in self.requests if r.resource_name == resource) > after and resource in self.endpoints
        async with self.registered:
            await asyncio.wait_for(self.registered.wait_for(done), timeout)
        ep = self.endpoints[resource]
        await ep.wait_for(lambda s: True, timeout)
        return ep


