"""CPU policy under 64 concurrent gRPC clients, with durability.

Same machine and population as bench/cpu.py (256 CPUs, 8 NUMA, 1,000 live
containers). 64 clients in 4 client processes, each client on its own channel, each doing Allocate of a
new container then RemovePod of it, in a loop, for a fixed time; every call
changes state, so every call is one journal record (group-committed: one
fdatasync for all records waiting at that moment).

Two kinds of container:
- shared (the pod is running, so it joins its pool: the pool is re-sized and
  its ~870 members re-pointed on every call; the policy's own cost dominates);
- ramp (a shared container of a pod not running yet: no re-size; what is left
  is gRPC + journal, so the group commit shows).

Floors in the same run, same 64 clients: a no-op server (no persistence),
and a no-op server that appends + fdatasyncs one record per call without
group commit (what a durable server without group commit can do); and the
real policy without persistence (the ceiling of the journal's rows: what is
left between them is the journal).

After each run: "loss" check. The journal is recovered from disk in a fresh
store and must equal the policy's memory exactly (every acknowledged change
present, nothing else).

Run: .venv/bin/python bench/cpu_concurrency.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb  # noqa: E402
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc  # noqa: E402
from agent.cpu.checkpoint import CheckpointStore  # noqa: E402
from agent.daemon.daemon import freeze_startup_heap  # noqa: E402

from bench.cpu import ServerThread, populate, start_noop, start_real, stop_real  # noqa: E402

CLIENTS = 64
PROCS = 4


def request(uid: str) -> pb.ResourceRequest:
    return pb.ResourceRequest(pod_uid=uid, pod_name=uid, pod_namespace="bench", container_name="c",
                              container_type=pb.MAIN, resource_name="cpu", resource_requests={"cpu": 0.1})  # fmt: skip


async def clients(sock: Path, seconds: float, tag: str, n: int) -> tuple[int, list[float]]:
    lat: list[float] = []
    ops = 0
    stop_at = time.perf_counter() + seconds

    async def one(c: int) -> None:
        nonlocal ops
        async with grpc.aio.insecure_channel(f"unix://{sock}") as ch:
            stub = pb_grpc.ResourcePluginStub(ch)
            i = 0
            while time.perf_counter() < stop_at:
                uid = f"{tag}-{c}-{i}"
                i += 1
                for call, msg in ((stub.Allocate, request(uid)), (stub.RemovePod, pb.RemovePodRequest(pod_uid=uid))):
                    t0 = time.perf_counter()
                    await call(msg)
                    lat.append(time.perf_counter() - t0)
                    ops += 1

    await asyncio.gather(*(one(c) for c in range(n)))
    return ops, lat


def client_process(sock: str, seconds: float, tag: str, n: int) -> tuple[int, list[float]]:
    return asyncio.run(clients(Path(sock), seconds, tag, n))


def drive(pool: ProcessPoolExecutor, sock: Path, seconds: float, tag: str) -> tuple[float, float, float]:
    """CLIENTS clients spread over client processes (the server keeps its own interpreter)."""
    per = CLIENTS // PROCS
    t0 = time.perf_counter()
    parts = list(pool.map(client_process, [str(sock)] * PROCS, [seconds] * PROCS,
                          [f"{tag}{k}" for k in range(PROCS)], [per] * PROCS))
    wall = time.perf_counter() - t0
    ops = sum(o for o, _ in parts)
    lat = sorted(x for _, xs in parts for x in xs)
    return ops / wall, statistics.median(lat) * 1e3, lat[int(len(lat) * 0.99)] * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    seconds = 2.0 if args.quick else 6.0
    p = populate()
    freeze_startup_heap()
    pool = ProcessPoolExecutor(PROCS, mp_context=get_context("spawn"))
    list(pool.map(abs, range(PROCS)))  # start the client interpreters before timing
    srv = ServerThread()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hwcpucc-", dir="/var/tmp") as d:
        fd = os.open(Path(d) / "floor.wal", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            noop_server, noop_sock = srv.run(start_noop())
            rows.append(("no-op gRPC (floor)", drive(pool, noop_sock, seconds, "f"), None))
            srv.run(noop_server.stop(0))
            durable_server, durable_sock = srv.run(start_noop(fd))
            rows.append(("no-op + fdatasync per call", drive(pool, durable_sock, seconds, "df"), None))
            srv.run(durable_server.stop(0))
            for kind in ("shared", "ramp"):
                p.pod_running = (lambda uid: True) if kind == "shared" else (lambda uid: False)
                # the policy and gRPC alone, no persistence: what the journal's rows can reach at best
                server, sock, engine = srv.run(start_real(p, None))
                rows.append((f"hwagent, no journal, {kind}", drive(pool, sock, seconds, f"n{kind}"), None))
                srv.run(stop_real(server, engine))
                p.listeners.clear()
                jdir = Path(d) / f"journal-{kind}"
                server, sock, engine = srv.run(start_real(p, jdir))
                j = getattr(engine.store, "journal", None)  # None: a tree before the journal (before/after runs)
                syncs0, recs0 = (j.syncs, j.records) if j else (0, 0)
                r = drive(pool, sock, seconds, kind)
                srv.run(stop_real(server, engine))
                p.listeners.clear()
                per_sync = (j.records - recs0) / max(1, j.syncs - syncs0) if j else 1.0
                back = CheckpointStore(jdir).load()
                lost = back is None or back.entries != p.state.entries or back.pools != p.state.pools
                rows.append((f"hwagent journal, {kind}", r, (per_sync, lost)))
        finally:
            os.close(fd)
            srv.close()
            pool.shutdown()
    floor_ops = rows[0][1][0]
    print(f"{CLIENTS} concurrent clients, Allocate + RemovePod of a new container per iteration, "
          f"{seconds:g}s per row (1,000 live containers), load average {os.getloadavg()[0]:.1f}")
    for name, (ops, p50, p99), extra in rows:
        line = f"  {name:30s} {ops:8.0f} ops/s  p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  ratio {ops / floor_ops:5.2f}x floor"
        if extra is not None:
            line += f"  records/fdatasync {extra[0]:5.1f}  {'LOSS' if extra[1] else 'no loss'}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
