"""CPU policy benchmark: GetTopologyHints + Allocate latency, p50/p99.

Machine: synthetic 256 CPUs / 2 sockets / 8 NUMA nodes / 2 threads per core,
2 reserved CPUs, 1,000 live containers (870 shared in two pools, 100
reclaimed, 30 dedicated numa_binding on NUMA 6-7). Each timed operation is one
new container's hints + Allocate; the pod is removed afterwards (untimed) so
the population stays at 1,000. Two kinds:
- dedicated: dedicated_cores numa_binding, 2 CPUs (hint walk, TakeByTopology,
  pool re-sizing over all 1,000 entries);
- shared: shared_cores joining a running pool (pool re-sizing).

Paths, all in this run:
- floor: a no-op ResourcePlugin answering the same two RPCs with empty messages;
- durable floor: the same, whose Allocate also appends a 1 KiB record to a
  file and fdatasyncs it (the physical floor of a durable allocation);
- in-process: DynamicPolicy calls (the pure policy);
- gRPC: the real ResourcePlugin server on a unix socket, no persistence;
- gRPC+journal: the same with the policy's journal (one record + fdatasync per
  change, ``agent.journal``), as the daemon runs it.
The goal (issue 15): gRPC+journal p50 and p99 <= 1.5x the durable floor's.
Files go to /var/tmp (a real disk here; /tmp may be tmpfs elsewhere).

Run: .venv/bin/python bench/cpu.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb  # noqa: E402
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc  # noqa: E402
from agent.cpu.checkpoint import CheckpointStore  # noqa: E402
from agent.cpu.durable import DurablePolicy  # noqa: E402
from agent.contracts.hints import TopologyHint  # noqa: E402
from agent.cpu.policy import DynamicPolicy, PolicyOptions, Request  # noqa: E402
from agent.cpu.qos import CPU_ENHANCEMENT_KEY, MEMORY_ENHANCEMENT_KEY, QOS_KEY  # noqa: E402
from agent.cpu.server import serve  # noqa: E402
from agent.daemon.daemon import freeze_startup_heap  # noqa: E402
from agent.topology.model import synthetic  # noqa: E402

BIND = json.dumps({"numa_binding": "true", "numa_exclusive": "false"})
RECORD = b"r" * 1024


class Clock:
    t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def populate() -> DynamicPolicy:
    topo = synthetic(sockets=2, numa_per_socket=4, cores_per_numa=16, threads_per_core=2)
    clock = Clock()
    p = DynamicPolicy(topo, PolicyOptions(reserved_count=2), clock=clock)
    for i in range(30):
        p.allocate(Request(pod_uid=f"ded-{i}", container_name="c", resource_requests={"cpu": 2},
                           annotations={QOS_KEY: "dedicated_cores", MEMORY_ENHANCEMENT_KEY: BIND},
                           hint=TopologyHint(frozenset({6 + i % 2}), True)))  # fmt: skip
    for i in range(870):
        ann = {CPU_ENHANCEMENT_KEY: json.dumps({"cpuset_pool": "batch"})} if i % 3 == 0 else {}
        p.allocate(Request(pod_uid=f"sh-{i}", container_name="c", resource_requests={"cpu": 0.2}, annotations=ann))
    clock.t += 60
    p.complete_ramp_up()
    for i in range(100):
        p.allocate(Request(pod_uid=f"rc-{i}", container_name="c", resource_requests={"cpu": 1},
                           annotations={QOS_KEY: "reclaimed_cores"}))  # fmt: skip
    p.pod_running = lambda uid: True
    assert len(p.state.containers()) == 1000
    return p


def new_request(kind: str, i: int) -> Request:
    if kind == "dedicated":
        return Request(pod_uid=f"b-{i}", container_name="c", resource_requests={"cpu": 2},
                       annotations={QOS_KEY: "dedicated_cores", MEMORY_ENHANCEMENT_KEY: BIND})  # fmt: skip
    return Request(pod_uid=f"b-{i}", container_name="c", resource_requests={"cpu": 0.5})


def to_pb(r: Request) -> pb.ResourceRequest:
    return pb.ResourceRequest(pod_uid=r.pod_uid, pod_name=r.pod_uid, pod_namespace="bench",
                              container_name=r.container_name, container_type=pb.MAIN, resource_name="cpu",
                              resource_requests=dict(r.resource_requests), annotations=dict(r.annotations))  # fmt: skip


def pct(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs) * 1e6, xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e6


def bench_inprocess(p: DynamicPolicy, kind: str, n: int) -> list[float]:
    out = []
    for i in range(n):
        r = new_request(kind, i)
        t0 = time.perf_counter()
        h = p.get_topology_hints(r)
        if h.hints:
            r = Request(**{**r.__dict__, "hint": h.hints[0]})
        p.allocate(r)
        out.append(time.perf_counter() - t0)
        p.remove_pod(r.pod_uid)
    return out


class Noop(pb_grpc.ResourcePluginServicer):
    def __init__(self, fd: int | None = None) -> None:
        self.fd = fd
        self.off = 0

    async def GetTopologyHints(self, request, context):
        return pb.ResourceHintsResponse()

    async def Allocate(self, request, context):
        if self.fd is not None:  # the durable floor: one small record appended and synced
            self.off += os.pwrite(self.fd, RECORD, self.off)
            os.fdatasync(self.fd)
        return pb.ResourceAllocationResponse()

    async def RemovePod(self, request, context):
        return pb.RemovePodResponse()


class ServerThread:
    """An asyncio loop with a grpc.aio server in a thread; the client stays sync."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.t = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.t.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.t.join(5)


def bench_grpc(sock: Path, kind: str, n: int, real: bool) -> list[float]:
    out = []
    with grpc.insecure_channel(f"unix://{sock}") as ch:
        stub = pb_grpc.ResourcePluginStub(ch)
        stub.GetTopologyHints(to_pb(new_request(kind, -1)))  # warm the channel
        stub.RemovePod(pb.RemovePodRequest(pod_uid="b--1"))
        for i in range(n):
            m = to_pb(new_request(kind, i))
            t0 = time.perf_counter()
            h = stub.GetTopologyHints(m)
            hints = h.resource_hints["cpu"].hints if real else []
            if hints:
                m.hint.CopyFrom(hints[0])
            stub.Allocate(m)
            out.append(time.perf_counter() - t0)
            stub.RemovePod(pb.RemovePodRequest(pod_uid=m.pod_uid))
    return out


async def start_real(p: DynamicPolicy, ckpt_dir: Path | None):
    store = CheckpointStore(ckpt_dir) if ckpt_dir else None
    engine = DurablePolicy(p, store)
    if store is not None:
        store.save(p.state)
    sock = Path(tempfile.mkdtemp(prefix="hwcpub-")) / "cpu.sock"
    server, _ = await serve(engine, sock)
    return server, sock, engine


async def stop_real(server, engine: DurablePolicy) -> None:
    await server.stop(0)
    if hasattr(engine, "wait_durable"):
        await engine.wait_durable()
    else:  # the engine before the journal (bench run against an older tree for before/after figures)
        await engine.persist.wait()
    if engine.store is not None and hasattr(engine.store, "journal"):
        await engine.store.journal.close()


async def start_noop(fd: int | None = None):
    sock = Path(tempfile.mkdtemp(prefix="hwcpub-")) / "noop.sock"
    server = grpc.aio.server()
    pb_grpc.add_ResourcePluginServicer_to_server(Noop(fd), server)
    server.add_insecure_port(f"unix://{sock}")
    await server.start()
    return server, sock


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    args = ap.parse_args()
    n = 60 if args.quick else 300
    t0 = time.perf_counter()
    p = populate()
    print(f"setup: 256 cpus / 8 NUMA, {len(p.state.containers())} live containers, "
          f"pools {{{', '.join(f'{k}:{len(v)}' for k, v in sorted(p.state.pools.items()))}}} "
          f"in {time.perf_counter() - t0:.1f}s")  # fmt: skip
    freeze_startup_heap()  # as the daemon does once its components are up
    srv = ServerThread()
    results: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}  # process CPU seconds per op, one figure per round
    paths = ("floor", "durable floor", "in-process", "gRPC", "gRPC+journal")
    with tempfile.TemporaryDirectory(prefix="hwcpuck-", dir="/var/tmp") as d:
        fd = os.open(Path(d) / "floor.wal", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            noop_server, noop_sock = srv.run(start_noop())
            durable_server, durable_sock = srv.run(start_noop(fd))
            for kind in ("dedicated", "shared"):
                for rnd in range(2):  # interleaved rounds: load drifts on a shared machine
                    def add(path: str, run: Callable[..., list[float]], *args: object, kind: str = kind) -> None:
                        c0 = time.process_time()  # client + server + journal thread: one process
                        xs = run(*args)
                        cpu.setdefault((path, kind), []).append((time.process_time() - c0) / len(xs))
                        results.setdefault((path, kind), []).extend(xs)

                    add("floor", bench_grpc, noop_sock, kind, n, False)
                    add("durable floor", bench_grpc, durable_sock, kind, n, False)
                    add("in-process", bench_inprocess, p, kind, n)
                    server, sock, engine = srv.run(start_real(p, None))
                    add("gRPC", bench_grpc, sock, kind, n, True)
                    srv.run(stop_real(server, engine))
                    p.listeners.clear()
                    server, sock, engine = srv.run(start_real(p, Path(d) / f"j-{kind}-{rnd}"))
                    add("gRPC+journal", bench_grpc, sock, kind, n, True)  # (whole-file checkpoint before)
                    srv.run(stop_real(server, engine))
                    p.listeners.clear()
            srv.run(noop_server.stop(0))
            srv.run(durable_server.stop(0))
        finally:
            os.close(fd)
            srv.close()
    assert len(p.state.containers()) == 1000
    print(f"hints+Allocate, {2 * n} ops per row, p50/p99 wall in microseconds; CPU = process CPU time "
          f"(client, server, journal thread) per op, median of the rounds; ratio = against the no-op floor | "
          f"against the durable floor (p50, p99, CPU); load average {os.getloadavg()[0]:.1f}")
    for kind in ("dedicated", "shared"):
        f50, f99 = pct(results[("floor", kind)])
        d50, d99 = pct(results[("durable floor", kind)])
        dcpu = statistics.median(cpu[("durable floor", kind)]) * 1e6
        for path in paths:
            p50, p99 = pct(results[(path, kind)])
            c = statistics.median(cpu[(path, kind)]) * 1e6
            print(f"  {kind:9s} {path:13s} p50 {p50:9.0f} us  p99 {p99:9.0f} us  CPU {c:7.0f} us  "
                  f"ratio {p50 / f50:5.2f}x | durable {p50 / d50:5.2f}x p50 {p99 / d99:5.2f}x p99 "
                  f"{c / dcpu:5.2f}x CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
