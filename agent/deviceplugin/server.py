"""One DevicePlugin v1beta1 gRPC server (grpc.aio) for one extended resource.

The server holds a snapshot of its devices; its owner replaces the snapshot
(``update``) and every open ListAndWatch stream then sends the full list
again, as the kubelet expects. Requests are checked whole before any answer
is built, so a bad request changes nothing and gets INVALID_ARGUMENT,
NOT_FOUND or FAILED_PRECONDITION with a message naming the bad ids.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from prometheus_client import Counter, Gauge, Histogram

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from agent.devices.config import ResourceRule
from agent.devices.model import Device
from agent.devices.rules import ContainerGrant, grant
from agent.deviceplugin.allocation import RequestError, check_ids, preferred
from agent.eventlog import get_logger
from agent.grpcguard import new_server
from agent.unixsock import serve_unix

__all__ = ["PluginDevice", "DevicePluginServer", "HEALTHY", "UNHEALTHY", "socket_name"]

log = get_logger("hwagent.deviceplugin")

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"

REQUESTS = Counter("hwagent_builtin_plugin_requests_total", "DevicePlugin RPCs served, by resource, method and status",
                   ["resource", "method", "code"])
ALLOCATE_SECONDS = Histogram("hwagent_builtin_plugin_allocate_duration_seconds",
                             "Time to answer one Allocate RPC", ["resource"],
                             buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25))
DEVICES = Gauge("hwagent_builtin_plugin_devices", "Devices a plugin offers, by resource and health",
                ["resource", "health"])

_CODES = {"invalid": grpc.StatusCode.INVALID_ARGUMENT, "not_found": grpc.StatusCode.NOT_FOUND,
          "precondition": grpc.StatusCode.FAILED_PRECONDITION}


def socket_name(resource: str) -> str:
    """"example.com/fast-nvme" -> "hwagent-example.com_fast-nvme.sock" (a bare file name,
    as the kubelet joins RegisterRequest.endpoint to its device-plugins dir)."""
    return "hwagent-" + resource.replace("/", "_") + ".sock"


@dataclass(frozen=True)
class PluginDevice:
    device: Device
    healthy: bool = True
    reason: str = ""

    @property
    def id(self) -> str:
        return self.device.id


class DevicePluginServer(pb_grpc.DevicePluginServicer):
    def __init__(self, rule: ResourceRule, socket_path: str | Path) -> None:
        self.rule = rule
        self.resource = rule.name
        self.socket_path = Path(socket_path)
        self._devices: dict[str, PluginDevice] = {}
        self._version = 0
        self._watchers: set[asyncio.Event] = set()
        self._server: grpc.aio.Server | None = None
        self._stopping = False

    # -- owner side -----------------------------------------------------------

    @property
    def devices(self) -> dict[str, PluginDevice]:
        return dict(self._devices)

    @property
    def version(self) -> int:
        return self._version

    def update(self, devices: Sequence[PluginDevice]) -> bool:
        """Replace the snapshot; wakes ListAndWatch streams if anything changed."""
        new = {d.id: d for d in sorted(devices, key=lambda d: d.id)}
        if new == self._devices:
            return False
        self._devices = new
        self._version += 1
        healthy = sum(1 for d in new.values() if d.healthy)
        DEVICES.labels(self.resource, HEALTHY).set(healthy)
        DEVICES.labels(self.resource, UNHEALTHY).set(len(new) - healthy)
        for ev in self._watchers:
            ev.set()
        return True

    async def start(self) -> None:
        server = new_server("deviceplugin")
        pb_grpc.add_DevicePluginServicer_to_server(self, server)
        await serve_unix(server, self.socket_path)
        self._server = server
        self._stopping = False
        log.info("plugin serving", resource=self.resource, socket=self.socket_path, devices=len(self._devices))

    def serving(self) -> bool:
        return self._server is not None and self.socket_path.is_socket()

    async def stop(self, grace: float | None = 0.5) -> None:
        self._stopping = True
        for ev in self._watchers:
            ev.set()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        try:
            self.socket_path.unlink()
        except FileNotFoundError:
            pass

    async def restart(self) -> None:
        """Serve again on a fresh socket (the kubelet deletes plugin sockets when it restarts)."""
        await self.stop(grace=0)
        await self.start()

    # -- gRPC side --------------------------------------------------------------

    def options(self) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(pre_start_required=self.rule.pre_start_required,
                                      get_preferred_allocation_available=True)

    async def GetDevicePluginOptions(self, request: pb.Empty, context: grpc.aio.ServicerContext) -> pb.DevicePluginOptions:
        REQUESTS.labels(self.resource, "GetDevicePluginOptions", "OK").inc()
        return self.options()

    def snapshot(self) -> pb.ListAndWatchResponse:
        out = []
        for d in self._devices.values():
            topo = (pb.TopologyInfo(nodes=[pb.NUMANode(ID=d.device.numa_node)])
                    if d.device.numa_node is not None else None)
            out.append(pb.Device(ID=d.id, health=HEALTHY if d.healthy else UNHEALTHY, topology=topo))
        return pb.ListAndWatchResponse(devices=out)

    async def ListAndWatch(self, request: pb.Empty, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.ListAndWatchResponse]:
        REQUESTS.labels(self.resource, "ListAndWatch", "OK").inc()
        ev = asyncio.Event()
        self._watchers.add(ev)
        log.info("list and watch opened", resource=self.resource, watchers=len(self._watchers))
        try:
            while not self._stopping:
                ev.clear()
                yield self.snapshot()
                await ev.wait()
        finally:
            self._watchers.discard(ev)
            log.info("list and watch closed", resource=self.resource)

    async def _refuse(self, context: grpc.aio.ServicerContext, method: str, err: RequestError) -> None:
        code = _CODES[err.code]
        REQUESTS.labels(self.resource, method, code.name).inc()
        log.warning("request refused", resource=self.resource, method=method, code=code.name, message=str(err))
        await context.abort(code, f"{self.resource}: {err}")

    async def GetPreferredAllocation(self, request: pb.PreferredAllocationRequest,
                                     context: grpc.aio.ServicerContext) -> pb.PreferredAllocationResponse:
        numa = {i: d.device.numa_node for i, d in self._devices.items()}
        out = []
        try:
            for n, req in enumerate(request.container_requests):
                try:
                    ids = preferred(list(req.available_deviceIDs), list(req.must_include_deviceIDs),
                                    req.allocation_size, numa, self._devices)
                except RequestError as e:
                    raise RequestError(e.code, f"container_requests[{n}]: {e}") from None
                out.append(pb.ContainerPreferredAllocationResponse(deviceIDs=ids))
        except RequestError as e:
            await self._refuse(context, "GetPreferredAllocation", e)
        REQUESTS.labels(self.resource, "GetPreferredAllocation", "OK").inc()
        return pb.PreferredAllocationResponse(container_responses=out)

    def _check_allocatable(self, n: int, ids: Sequence[str]) -> None:
        if not ids:
            raise RequestError("invalid", f"container_requests[{n}]: devices_ids is empty")
        try:
            check_ids(ids, self._devices)
        except RequestError as e:
            raise RequestError(e.code, f"container_requests[{n}]: {e}") from None
        bad = [i for i in ids if not self._devices[i].healthy]
        if bad:
            reasons = "; ".join(f"{i} ({self._devices[i].reason or 'unhealthy'})" for i in bad)
            raise RequestError("precondition", f"container_requests[{n}]: device(s) unhealthy: {reasons}")

    def grant_for(self, ids: Sequence[str]) -> ContainerGrant:
        return grant(self.rule, [self._devices[i].device for i in ids])

    async def Allocate(self, request: pb.AllocateRequest, context: grpc.aio.ServicerContext) -> pb.AllocateResponse:
        t0 = time.perf_counter()
        try:
            for n, req in enumerate(request.container_requests):
                self._check_allocatable(n, list(req.devices_ids))
        except RequestError as e:
            await self._refuse(context, "Allocate", e)
        resp = pb.AllocateResponse()
        for req in request.container_requests:
            g = self.grant_for(list(req.devices_ids))
            c = resp.container_responses.add()
            c.envs.update(g.envs)
            c.annotations.update(g.annotations)
            for m in g.mounts:
                c.mounts.add(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for d in g.devices:
                c.devices.add(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for name in g.cdi_devices:
                c.cdi_devices.add(name=name)
        REQUESTS.labels(self.resource, "Allocate", "OK").inc()
        ALLOCATE_SECONDS.labels(self.resource).observe(time.perf_counter() - t0)
        return resp

    async def PreStartContainer(self, request: pb.PreStartContainerRequest,
                                context: grpc.aio.ServicerContext) -> pb.PreStartContainerResponse:
        try:
            check_ids(list(request.devices_ids), self._devices)
        except RequestError as e:
            await self._refuse(context, "PreStartContainer", e)
        REQUESTS.labels(self.resource, "PreStartContainer", "OK").inc()
        log.info("pre start", resource=self.resource, devices=",".join(request.devices_ids))
        return pb.PreStartContainerResponse()
