"""A pod-resources v1 client of the kubelet, that survives the kubelet restarting.

The kubelet recreates ``pod-resources/kubelet.sock`` when it restarts; a gRPC
channel on the old socket then fails every call. The client keeps one channel
and drops it on any error or when the socket's inode changes, so the next
refresh dials the new socket. ``Get`` is asked for only when the kubelet
serves it (the KubeletPodResourcesGet feature gate): the first UNIMPLEMENTED
turns it off for the channel's life.
"""

from __future__ import annotations

import os
from pathlib import Path

import grpc

from agent.api.podresources.v1 import api_pb2 as pr
from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc
from agent.cpuset import CPUSet
from agent.eventlog import get_logger
from agent.contracts.poddirectory import ContainerResources, PodResources, PodResourcesSnapshot
from agent.unixsock import dial

log = get_logger("hwagent.kubelet")

__all__ = ["PodResourcesClient", "PodResourcesUnavailable", "from_list_response"]


class PodResourcesUnavailable(Exception):
    """The kubelet's pod-resources socket cannot answer now (the message says why)."""


def _container(c: pr.ContainerResources) -> ContainerResources:
    devices: dict[str, list[str]] = {}
    for d in c.devices:
        ids = devices.setdefault(d.resource_name, [])
        ids.extend(i for i in d.device_ids if i not in ids)
    return ContainerResources(c.name, {k: tuple(v) for k, v in devices.items()}, CPUSet(c.cpu_ids))


def _pod(p: pr.PodResources) -> PodResources:
    return PodResources(p.namespace, p.name, tuple(_container(c) for c in p.containers))


def from_list_response(
    resp: pr.ListPodResourcesResponse, alloc: pr.AllocatableResourcesResponse | None = None
) -> PodResourcesSnapshot:
    allocatable: dict[str, list[str]] = {}
    for d in alloc.devices if alloc is not None else ():
        allocatable.setdefault(d.resource_name, []).extend(d.device_ids)
    return PodResourcesSnapshot(
        tuple(_pod(p) for p in resp.pod_resources),
        {k: tuple(sorted(set(v))) for k, v in allocatable.items()},
        CPUSet(alloc.cpu_ids) if alloc is not None else CPUSet(),
    )


class PodResourcesClient:
    def __init__(self, socket_path: str | Path, timeout_s: float = 5.0) -> None:
        self.socket_path = Path(socket_path)
        self.timeout_s = timeout_s
        self._channel: grpc.aio.Channel | None = None
        self._stub: pr_grpc.PodResourcesListerStub | None = None
        self._inode: int | None = None
        self.get_supported: bool | None = None
        self.reconnects = 0

    def _inode_now(self) -> int | None:
        try:
            return os.stat(self.socket_path).st_ino
        except OSError:
            return None

    async def _drop(self) -> None:
        if self._channel is not None:
            await self._channel.close()
        self._channel = self._stub = None
        self.get_supported = None

    async def _connect(self) -> pr_grpc.PodResourcesListerStub:
        ino = self._inode_now()
        if ino is None:
            await self._drop()
            raise PodResourcesUnavailable(f"no kubelet pod-resources socket at {self.socket_path}")
        if self._stub is not None and ino != self._inode:
            log.info("podresources socket recreated", socket=self.socket_path)
            await self._drop()
        if self._stub is None:
            self._channel = dial(self.socket_path, "podresources", aio=True)
            self._stub = pr_grpc.PodResourcesListerStub(self._channel)
            self._inode = ino
            self.reconnects += 1
        return self._stub

    async def snapshot(self) -> PodResourcesSnapshot:
        """List + GetAllocatableResources; PodResourcesUnavailable on any failure."""
        stub = await self._connect()
        try:
            resp = await stub.List(pr.ListPodResourcesRequest(), timeout=self.timeout_s)
        except grpc.aio.AioRpcError as e:
            await self._drop()
            raise PodResourcesUnavailable(f"List at {self.socket_path}: {e.code().name}: {e.details()}") from None
        alloc = None
        try:
            alloc = await stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=self.timeout_s)
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:  # older kubelets lack it: List alone is fine
                log.info("podresources allocatable failed", code=e.code().name, details=e.details())
        return from_list_response(resp, alloc)

    async def get(self, namespace: str, name: str) -> PodResources | None:
        """One pod (the Get call) when the kubelet serves it; None when not served or not found."""
        if self.get_supported is False:
            return None
        stub = await self._connect()
        try:
            resp = await stub.Get(pr.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace),
                                  timeout=self.timeout_s)
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                self.get_supported = False
            elif e.code() != grpc.StatusCode.NOT_FOUND:
                await self._drop()
            return None
        self.get_supported = True
        return _pod(resp.pod_resources)

    async def close(self) -> None:
        await self._drop()
