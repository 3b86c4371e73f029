"""Device-plugin host benchmark.

1. Allocation latency over 1,024 devices on 8 NUMA nodes (128 per node), with
   topology hints, p50/p99 of DeviceManager.allocate():
   - in-process: the plugin is an in-process endpoint (no socket), so the
     figure is the host's own cost (choice, bookkeeping, checkpoint);
   - over gRPC: a real DevicePlugin server on a unix socket (Allocate RPC);
   both without persistence and with the host's journal (one record +
   fdatasync per allocation, ``agent.journal``), and hints + Allocate over
   gRPC with the journal (what a caller of the host waits for).
   Floors measured in the same run: a no-op unary gRPC round trip on a unix
   socket, and the durable floor: the same round trip whose handler appends a
   1 KiB record to a file and fdatasyncs it. Goal (issue 15): hints +
   Allocate over gRPC with the journal, p50 and p99 <= 1.5x the durable floor.
2. Restart-to-serving with 10,000 checkpointed allocations: from a cold
   DeviceManager to a served Register call and a first allocation, against the
   same restart with an empty checkpoint.

Run: scripts/dev bench devicemanager   (or .venv/bin/python bench/devicemanager.py [--quick])
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb  # noqa: E402
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc  # noqa: E402
from agent.devicemanager.checkpoint import encode  # noqa: E402
from agent.contracts.devices import CheckpointData
from agent.devicemanager.manager import DeviceManager  # noqa: E402
from agent.contracts.devices import ContainerRequest
from agent.contracts.devices import Allocation, Device  # noqa: E402
from agent.devicemanager.registration import RegistrationServer  # noqa: E402
from agent.statefile import write_atomic  # noqa: E402

RES = "example.com/bench"
NODES = 8
PER_NODE = 128


def devices() -> list[pb.Device]:
    return [
        pb.Device(ID=f"dev-{n}-{i:03d}", health="Healthy", topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=n)]))
        for n in range(NODES) for i in range(PER_NODE)
    ]


class Plugin(pb_grpc.DevicePluginServicer):
    def __init__(self, devs: list[pb.Device]) -> None:
        self.devs = devs

    async def GetDevicePluginOptions(self, request, context):
        return pb.DevicePluginOptions()

    async def ListAndWatch(self, request, context):
        yield pb.ListAndWatchResponse(devices=self.devs)
        await asyncio.Event().wait()

    async def Allocate(self, request, context):
        return allocate_response(request.container_requests[0].devices_ids)


def allocate_response(ids) -> pb.AllocateResponse:
    r = pb.ContainerAllocateResponse(envs={"BENCH_DEVICES": ",".join(ids)})
    r.devices.extend(pb.DeviceSpec(container_path=f"/dev/{i}", host_path=f"/dev/{i}", permissions="rw") for i in ids)
    return pb.AllocateResponse(container_responses=[r])


class InProcessEndpoint:
    """The Endpoint interface without a socket: measures the host alone."""

    def __init__(self, devs: list[pb.Device]) -> None:
        self.resource, self.socket = RES, "in-process"
        self.options = pb.DevicePluginOptions()
        self.stop_time = None
        self._devs = devs

    @property
    def stopped(self) -> bool:
        return False

    def run(self, on_snapshot, on_closed) -> None:
        on_snapshot(self, [Device.from_pb(d) for d in self._devs])

    async def allocate(self, ids):
        return allocate_response(ids).container_responses[0]

    async def close(self) -> None:
        pass


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


async def allocation_run(manager: DeviceManager, n: int, seed: int = 1, hints: bool = False) -> list[float]:
    """n allocations of 1-8 devices with a random NUMA hint; the oldest pods are
    released whenever fewer than 64 devices are free. Leaves nothing allocated."""
    rng = random.Random(seed)
    live: list[str] = []
    held = 0
    lat = []
    for i in range(n):
        count = rng.choice((1, 1, 2, 4, 8))
        while held + count > NODES * PER_NODE - 64:
            uid = live.pop(0)
            held -= sum(len(a.device_ids) for a in manager.container_allocations(uid).get("c", []))
            manager.release_pod(uid)
        req = ContainerRequest(f"pod-{seed}-{i}", "c", {RES: count}, hint=frozenset({rng.randrange(NODES)}))
        t0 = time.perf_counter()
        if hints:
            manager.topology_hints(req.pod_uid, "c", {RES: count})
        await manager.allocate(req)
        lat.append(time.perf_counter() - t0)
        live.append(req.pod_uid)
        held += count
    for uid in live:
        manager.release_pod(uid)
    return lat


async def noop_floor(sock: str, n: int, wal: Path | None = None) -> list[float]:
    fd = os.open(wal, os.O_RDWR | os.O_CREAT, 0o600) if wal else None
    off = 0
    record = b"r" * 1024

    class Noop(pb_grpc.DevicePluginServicer):
        async def GetDevicePluginOptions(self, request, context):
            nonlocal off
            if fd is not None:
                off += os.pwrite(fd, record, off)
                os.fdatasync(fd)
            return pb.DevicePluginOptions()

    server = grpc.aio.server()
    pb_grpc.add_DevicePluginServicer_to_server(Noop(), server)
    server.add_insecure_port(f"unix:{sock}")
    await server.start()
    lat = []
    async with grpc.aio.insecure_channel(f"unix://{sock}") as ch:
        stub = pb_grpc.DevicePluginStub(ch)
        for _ in range(50):
            await stub.GetDevicePluginOptions(pb.Empty())
        for _ in range(n):
            t0 = time.perf_counter()
            await stub.GetDevicePluginOptions(pb.Empty())
            lat.append(time.perf_counter() - t0)
    await server.stop(None)
    if fd is not None:
        os.close(fd)
    return lat


async def bench_allocation(base: Path, n: int) -> None:
    devs = devices()
    floor = await noop_floor(str(base / "noop.sock"), n)
    durable = await noop_floor(str(base / "noop2.sock"), n, wal=base / "floor.wal")
    rows: list[tuple[str, list[float]]] = []
    for checkpoint in (False, True):
        cp = base / f"cp-inproc-{checkpoint}" if checkpoint else None
        m = DeviceManager(numa_ids=range(NODES), checkpoint_path=cp)
        await m.start()
        m.attach(InProcessEndpoint(devs))
        await allocation_run(m, 50, seed=99)  # warm-up
        rows.append((f"in-process{' + journal' if checkpoint else ''}", await allocation_run(m, n)))
        await m.stop()
    for checkpoint, hints in ((False, False), (True, False), (True, True)):
        plugin_sock = str(base / f"plugin-{checkpoint}-{hints}.sock")
        server = grpc.aio.server()
        pb_grpc.add_DevicePluginServicer_to_server(Plugin(devs), server)
        server.add_insecure_port(f"unix:{plugin_sock}")
        await server.start()
        cp = base / f"cp-grpc-{checkpoint}-{hints}" if checkpoint else None
        m = DeviceManager(numa_ids=range(NODES), checkpoint_path=cp)
        await m.start()
        await m.register(RES, plugin_sock)
        while m.capacity()[1].get(RES, 0) < len(devs):
            await asyncio.sleep(0.01)
        await allocation_run(m, 50, seed=99)
        name = f"{'hints + ' if hints else ''}over gRPC{' + journal' if checkpoint else ''}"
        rows.append((name, await allocation_run(m, n, hints=hints)))
        await m.stop()
        await server.stop(None)
    f50, f99 = pct(floor, 0.5), pct(floor, 0.99)
    d50, d99 = pct(durable, 0.5), pct(durable, 0.99)
    print(f"allocation: {NODES * PER_NODE} devices on {NODES} NUMA nodes, {n} allocations of 1-8 devices with a NUMA hint")
    print(f"  {'no-op gRPC round trip (floor)':<36} p50 {f50 * 1e3:8.3f} ms  p99 {f99 * 1e3:8.3f} ms")
    print(f"  {'no-op gRPC + append + fdatasync':<36} p50 {d50 * 1e3:8.3f} ms  p99 {d99 * 1e3:8.3f} ms  "
          f"(the durable floor)")
    for name, lat in rows:
        p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
        print(f"  {name:<36} p50 {p50 * 1e3:8.3f} ms  p99 {p99 * 1e3:8.3f} ms  "
              f"ratio to floor p50 {p50 / f50:6.1f}x  p99 {p99 / f99:6.1f}x | "
              f"durable floor p50 {p50 / d50:5.2f}x p99 {p99 / d99:5.2f}x")
    m = DeviceManager(numa_ids=range(NODES), checkpoint_path=None)
    await m.start()
    m.attach(InProcessEndpoint(devs))
    hl = []
    for i in range(200):
        t0 = time.perf_counter()
        m.topology_hints(f"h{i}", "c", {RES: 1 + i % 256})
        hl.append(time.perf_counter() - t0)
    await m.stop()
    print(f"  {'topology hints (255 masks)':<36} p50 {pct(hl, .5) * 1e3:8.3f} ms  p99 {pct(hl, .99) * 1e3:8.3f} ms  "
          f"ratio to floor p50 {pct(hl, .5) / f50:6.1f}x")


def big_checkpoint(n_alloc: int) -> CheckpointData:
    per_res = 1024
    resources = [f"example.com/r{i}" for i in range((n_alloc + per_res - 1) // per_res)]
    resp = allocate_response(["x"]).container_responses[0].SerializeToString()
    allocs = tuple(
        Allocation(f"pod-{i}", "ns", f"name-{i}", "c", "app", resources[i // per_res],
                   ((f"d{i % per_res:04d}", ((i % per_res) // 128,)),), resp)
        for i in range(n_alloc)
    )
    registered = {r: tuple(f"d{j:04d}" for j in range(per_res)) for r in resources}
    return CheckpointData(allocations=allocs, registered=registered)


async def restart_to_serving(base: Path, data: CheckpointData) -> dict[str, float]:
    plugins = base / "dp"
    shutil.rmtree(plugins, ignore_errors=True)
    plugins.mkdir()
    write_atomic(plugins / "cp", encode(data))
    devs = devices()
    plugin_sock = plugins / "p.sock"
    # the plugin is up before the host restarts, as on a real node
    t = {}
    t0 = time.perf_counter()
    m = DeviceManager(numa_ids=range(NODES), checkpoint_path=plugins / "cp")
    await m.start()
    t["restore"] = time.perf_counter() - t0
    reg = RegistrationServer(m, plugins, "registration.sock", reserved={"cp"})
    await reg.start()
    server = grpc.aio.server()
    pb_grpc.add_DevicePluginServicer_to_server(Plugin(devs), server)
    server.add_insecure_port(f"unix:{plugin_sock}")
    await server.start()  # after reg.start(): its stale-socket cleanup would remove it
    t1 = time.perf_counter()
    async with grpc.aio.insecure_channel(f"unix://{reg.socket_path}") as ch:
        await pb_grpc.RegistrationStub(ch).Register(
            pb.RegisterRequest(version="v1beta1", endpoint="p.sock", resource_name=RES)
        )
    while m.capacity()[1].get(RES, 0) < len(devs):
        await asyncio.sleep(0.001)
    t["register"] = time.perf_counter() - t1
    await m.allocate(ContainerRequest("new-pod", "c", {RES: 1}, hint=frozenset({0})))
    t["total"] = time.perf_counter() - t0
    await reg.stop()
    await m.stop()
    await server.stop(None)
    return t


async def bench_restart(base: Path, n_alloc: int) -> None:
    data = big_checkpoint(n_alloc)
    t0 = time.perf_counter()
    raw = encode(data)
    enc = time.perf_counter() - t0
    empty = await restart_to_serving(base, CheckpointData())
    full = await restart_to_serving(base, data)
    print("restart to serving (host start -> Register served + snapshot applied -> first allocation done):")
    print(f"  checkpoint: {n_alloc} allocations, {len(raw) / 1e6:.1f} MB, encode {enc * 1e3:.0f} ms")
    for name, t in (("empty checkpoint (peer)", empty), (f"{n_alloc} allocations", full)):
        print(f"  {name:<28} restore {t['restore'] * 1e3:8.1f} ms  register {t['register'] * 1e3:7.1f} ms  "
              f"total {t['total'] * 1e3:8.1f} ms")
    print(f"  ratio total {full['total'] / empty['total']:.1f}x the empty-checkpoint restart")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer samples (CI smoke run)")
    args = ap.parse_args()
    n = 300 if args.quick else 2000
    base = Path(tempfile.mkdtemp(prefix="dmb-", dir="/var/tmp"))  # a real disk: fdatasync must cost what it costs
    try:
        await bench_allocation(base, n)
        await bench_restart(base, 10_000)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main())
