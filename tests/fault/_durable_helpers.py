"""Shared fixtures of the durability fault tests: a real tmpfs that can be
filled, write failures injected for one file descriptor, a cpu policy served
over gRPC on a journal, and a device host with an in-process plugin."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc

from agent.api.deviceplugin.v1beta1 import api_pb2 as dp_pb
from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.cpu.checkpoint import CheckpointStore
from agent.cpu.durable import DurablePolicy
from agent.cpu.policy import DynamicPolicy, PolicyOptions
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY
from agent.cpu.server import serve
from agent.contracts.devices import Device
from agent.topology.model import synthetic

TOPO = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=4, threads_per_core=2)  # 32 cpus, 4 NUMA
ONLINE = frozenset(c.id for c in TOPO.cpus)
BIND = json.dumps({"numa_binding": "true", "numa_exclusive": "false"})


@contextmanager
def tmpfs(size: str = "512k") -> Iterator[Path]:
    """A fresh tmpfs of ``size`` (the tests run as root), unmounted after."""
    d = Path(tempfile.mkdtemp(prefix=f"hwfault-{os.getpid()}-{uuid.uuid4().hex[:6]}-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)
        d.rmdir()


def fill(directory: Path) -> Path:
    """Write a filler file until the filesystem says ENOSPC; returns it (unlink to free)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * 4096
        while True:
            try:
                os.write(fd, chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC
                break
        try:  # the last partial page too
            while os.write(fd, b"\0"):
                pass
        except OSError:
            pass
    finally:
        os.close(fd)
    return filler


def files(directory: Path) -> dict[str, bytes]:
    """Every state file's bytes (the filler excluded): what 'disk as before' compares."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name != "filler" and p.is_file()}


class FailingIO:
    """Make the disk under ``directory`` fail: ``call`` ("write": os.write and
    os.pwrite, or "sync": os.fsync and os.fdatasync) raises ``err`` for file
    descriptors open on files there, while ``active``; with
    ``truncate_fails`` os.ftruncate fails too (the journal cannot even cut
    back). Every other descriptor goes through."""

    def __init__(self, monkeypatch, directory: Path, call: str, err: int, truncate_fails: bool = False) -> None:
        self.dir, self.err, self.hits, self.active = str(directory), err, 0, False
        names = {"write": ("write", "pwrite"), "sync": ("fsync", "fdatasync")}[call]
        names += ("ftruncate",) if truncate_fails else ()
        real = {name: getattr(os, name) for name in names}

        def under(fd: int) -> bool:
            try:
                return os.readlink(f"/proc/self/fd/{fd}").startswith(self.dir)
            except OSError:
                return False

        def wrap(name):
            def f(fd, *a):
                if self.active and under(fd):
                    self.hits += 1
                    raise OSError(err, os.strerror(err))
                return real[name](fd, *a)

            return f

        for name in names:
            monkeypatch.setattr(os, name, wrap(name))


def cpu_request(uid: str, qos: str | None = None, cpus: float = 1.0, hint: list[int] | None = None):
    ann = {}
    if qos == "dedicated_cores":
        ann = {QOS_KEY: qos, MEMORY_ENHANCEMENT_KEY: BIND}
    elif qos:
        ann = {QOS_KEY: qos}
    m = pb.ResourceRequest(pod_uid=uid, pod_namespace="ns", pod_name=uid, container_name="c", container_type=pb.MAIN,
                           resource_name="cpu", resource_requests={"cpu": cpus}, annotations=ann)  # fmt: skip
    if hint is not None:
        m.hint.CopyFrom(pb.TopologyHint(nodes=hint, preferred=True))
    return m


class CPUServer:
    """A cpu policy on a journal in ``directory``, served over gRPC (as the
    component does it: recover, build the policy, fresh snapshot, serve)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    async def __aenter__(self) -> CPUServer:
        self.store = CheckpointStore(self.dir, online=ONLINE)
        state = self.store.load()
        self.policy = DynamicPolicy(TOPO, PolicyOptions(reserved_count=2), state=state)
        self.engine = DurablePolicy(self.policy, self.store)
        self.store.save(self.policy.state)
        self.sock = self.dir.parent / f"cpu-{uuid.uuid4().hex[:8]}.sock"
        self.server, _ = await serve(self.engine, self.sock)
        self.channel = grpc.aio.insecure_channel(f"unix://{self.sock}")
        self.stub = pb_grpc.ResourcePluginStub(self.channel)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.channel.close()
        await self.server.stop(0)
        await self.engine.wait_durable()
        await self.store.journal.close()
        self.sock.unlink(missing_ok=True)


class InProcessPlugin:
    """The Endpoint interface without a socket (as bench/devicemanager.py)."""

    def __init__(self, resource: str, devices: list[Device]) -> None:
        self.resource, self.socket = resource, "in-process"
        self.options = dp_pb.DevicePluginOptions()
        self.stop_time = None
        self.stopped = False
        self._devices = devices

    def run(self, on_snapshot, on_closed) -> None:
        on_snapshot(self, self._devices)

    async def allocate(self, ids):
        return dp_pb.ContainerAllocateResponse(envs={"DEVS": ",".join(ids)})

    async def close(self) -> None:
        pass


def run(coro, timeout: float = 120.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())
