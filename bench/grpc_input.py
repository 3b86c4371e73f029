"""Head-of-line blocking from large request bodies, guarded vs unguarded server.

A built-in DevicePlugin server (256 devices) runs in a child process, three
times side by side in the same run: on hwagent's guarded server
(agent.grpcguard.new_server: per-API message limits, large bodies decoded off
the loop, undecodable bodies refused without a traceback, repeated log lines
limited); the same with every body decoded on the loop ("inline"); and on a
plain grpc.aio server with gRPC's defaults and no log limiter ("plain", the
configuration before issue 10). A probe client times
tiny GetDevicePluginOptions calls while a flood client sends Allocate bodies:

- idle: no flood (the floor);
- big: the largest body each server accepts (guarded: just under its 1 MiB
  limit; plain: just under gRPC's default 4 MiB), full of unknown device ids;
- oversized: 8 MiB bodies, which the guarded server refuses at the transport;
- garbage: 64-byte undecodable bodies, counting the log bytes each one costs.

Prints probe p50/p99 per condition and its ratio to the idle floor.
    .venv/bin/python bench/grpc_input.py [--seconds S]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import grpc  # noqa: E402

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb  # noqa: E402

OPTIONS = "/v1beta1.DevicePlugin/GetDevicePluginOptions"
ALLOCATE = "/v1beta1.DevicePlugin/Allocate"


def _serve(sock: str, mode: str, log_path: str, ready) -> None:
    import asyncio

    from agent.devices.config import ResourceRule
    from agent.devices.model import Device
    from agent.deviceplugin import server as srv
    from agent.daemon.logs import setup_logging

    handler = setup_logging("info", stream=open(log_path, "w"), journald=False)
    if mode == "inline":
        import agent.grpcguard as guard_mod

        guard_mod.OFFLOAD_BYTES = 1 << 40  # every body decoded on the loop
    elif mode == "plain":
        srv.new_server = lambda api: grpc.aio.server()  # the pre-issue-10 server: gRPC defaults, no guard
        handler.filters.clear()  # and no repeat limiter on the log

    async def main():
        p = srv.DevicePluginServer(ResourceRule(name="example.com/bench", block_name=("b*",)), sock)
        p.update([srv.PluginDevice(Device(id=f"b{i}", kind="block", name=f"b{i}", sysfs_path="/", numa_node=i % 4))
                  for i in range(256)])
        await p.start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def _allocate_body(size: int) -> bytes:
    ids, n = [], 0
    while True:
        body = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)]).SerializeToString()
        if len(body) >= size - 64:
            return body
        ids.extend(f"unknown-device-{n + k:012d}" for k in range(1000))
        n += 1000
        if len(body) + 30_000 > size:
            ids = ids[: max(1, len(ids) - 1000)] + [f"u{n}"] * ((size - len(body)) // 12)
            body = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)]
                                      ).SerializeToString()
            while len(body) > size - 16:
                ids.pop()
                body = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)]
                                          ).SerializeToString()
            return body


def _probe(sock: str, seconds: float, flood: bytes | None) -> tuple[list[float], int]:
    stop = threading.Event()
    sent = [0]

    def flooding():
        with grpc.insecure_channel(f"unix://{sock}", options=[("grpc.max_send_message_length", 64 << 20)]) as ch:
            call = ch.unary_unary(ALLOCATE, request_serializer=None, response_deserializer=None)
            while not stop.is_set():
                try:
                    call(flood, timeout=60)
                except grpc.RpcError:
                    pass
                sent[0] += 1

    threads = [threading.Thread(target=flooding, daemon=True) for _ in range(2)] if flood is not None else []
    for t in threads:
        t.start()
    lat: list[float] = []
    with grpc.insecure_channel(f"unix://{sock}") as ch:
        call = ch.unary_unary(OPTIONS, request_serializer=None, response_deserializer=None)
        call(b"", timeout=60)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            call(b"", timeout=60)
            lat.append(time.perf_counter() - t0)
            time.sleep(0.002)
    stop.set()
    for t in threads:
        t.join(120)
    return lat, sent[0]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    from agent.limits import GRPC_MESSAGE_LIMITS

    tmp = Path(tempfile.mkdtemp(prefix="bgi-", dir="/tmp"))
    ctx = mp.get_context("spawn")
    procs = {}
    try:
        for name in ("guarded", "inline", "plain"):
            ready = ctx.Event()
            p = ctx.Process(target=_serve, args=(str(tmp / f"{name}.sock"), name, str(tmp / f"{name}.log"), ready),
                            daemon=True)
            p.start()
            assert ready.wait(60), f"{name} server did not start"
            procs[name] = p
        limit = GRPC_MESSAGE_LIMITS["deviceplugin"].receive
        bodies = {
            "big": {"guarded": _allocate_body(limit), "inline": _allocate_body(limit),
                    "plain": _allocate_body(4 * 1024 * 1024)},
            "oversized": dict.fromkeys(("guarded", "inline", "plain"), b"\x0a" * (8 << 20)),
            "garbage": dict.fromkeys(("guarded", "inline", "plain"), b"\xff" * 64),
        }
        print(f"{'server':8} {'flood':10} {'body':>10} {'probe p50':>10} {'probe p99':>10} {'p99/idle':>9} "
              f"{'flood calls':>11} {'log B/call':>10}")
        for name in ("guarded", "inline", "plain"):
            sock = str(tmp / f"{name}.sock")
            idle, _ = _probe(sock, args.seconds, None)
            floor = pct(idle, 99)
            print(f"{name:8} {'idle':10} {0:>10} {pct(idle, 50) * 1e3:>8.3f}ms {floor * 1e3:>8.3f}ms {1.0:>9.1f}")
            for kind, per in bodies.items():
                log_before = (tmp / f"{name}.log").stat().st_size
                lat, sent = _probe(sock, args.seconds, per[name])
                log_bytes = (tmp / f"{name}.log").stat().st_size - log_before
                print(f"{name:8} {kind:10} {len(per[name]):>10} {pct(lat, 50) * 1e3:>8.3f}ms "
                      f"{pct(lat, 99) * 1e3:>8.3f}ms {pct(lat, 99) / floor:>9.1f} {sent:>11} "
                      f"{log_bytes / max(sent, 1):>10.0f}")
    finally:
        for p in procs.values():
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
