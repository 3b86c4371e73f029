"""DRA prepare latency over the kubelet's gRPC API (issue 27).

A sync client (as the kubelet's) calls NodePrepareResources (v1) on hwagent's
DRA socket for one claim of two loop disks, then NodeUnprepareResources, over
and over (the same claim: each prepare does the whole work again: the claim
file read, the CDI spec written atomically, the driver's state file written
atomically). The server side is what the daemon runs: ``DRAKubeletPlugin``
over ``DraDriver`` with claim files (``tests/peer/dra/hwside.py`` builds both),
on its own loop in a thread.

Floors in the same run, same socket kind, same client:
- no-op: NodePrepareResources with no claim (guard, servicer, empty answer);
- durable no-op: NodePrepareResources of one claim whose stand-in driver
  appends a 1 KiB record and fdatasyncs it, in the same directory as the state;
- fdatasync: a 1 KiB pwrite + fdatasync alone, no gRPC.

CPU is the process's (client, server, driver: one process) utime+stime per
op, median of the rounds. Run: .venv/bin/python bench/dra.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
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
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "peer" / "dra"))

from agent.api.dra.v1 import api_pb2 as pb  # noqa: E402
from agent.api.dra.v1 import api_pb2_grpc as pb_grpc  # noqa: E402
from agent.contracts.dra import PrepareOutcome  # noqa: E402
from agent.dra.kubeletplugin.service import add_dra_services  # noqa: E402
from agent.grpcguard import new_server  # noqa: E402
from agent.unixsock import serve_unix  # noqa: E402

import hwside  # noqa: E402

RECORD = b"x" * 1024


class DurableNoop:
    """A ClaimPreparer that only appends one record and fdatasyncs it: the durable floor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.off = 0

    def prepared(self):
        return {}

    async def prepare(self, claims):
        self.off += os.pwrite(self.fd, RECORD, self.off)
        os.fdatasync(self.fd)
        return {c.uid: PrepareOutcome() for c in claims}

    async def unprepare(self, claims):
        return {c.uid: "" for c in claims}


class Loop:
    """The server side's asyncio loop in a thread; the client stays sync, as the kubelet's."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.t = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.t.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.t.join(5)


async def start_real(base: Path):
    kubelet, root, cdi = base / "kubelet", base / "root", base / "cdi"
    for d in (kubelet, root, cdi):
        d.mkdir()
    hwside.write_files(root, base / "claim-v1beta1.json")
    ready = asyncio.Event()
    task = asyncio.get_running_loop().create_task(_serve(kubelet, root, cdi, ready))
    await ready.wait()
    return task, kubelet / "plugins" / hwside.DRIVER / "dra.sock"


async def _serve(kubelet: Path, root: Path, cdi: Path, ready: asyncio.Event) -> None:
    # hwside.serve waits for a signal; here the task is cancelled instead
    from agent.config import section_defaults
    from agent.contracts import DEVICE_PLUGINS, DRA_DRIVER, DaemonContext
    from agent.dra.driver import DraDriver
    from agent.dra.kubeletplugin.component import DRAKubeletPlugin
    from agent.dra.source import FileClaimSource
    from agent.topology.model import synthetic

    driver = DraDriver(hwside.DRIVER, root / "dra-state" / "prepared.json", str(cdi), FileClaimSource(root),
                       hwside.node_devices)
    driver.restore()
    ctx = DaemonContext(section_defaults(), root, synthetic(), mode="kubelet")
    ctx.publish(DEVICE_PLUGINS, hwside.Plugins())
    ctx.publish(DRA_DRIVER, driver)
    plugin = DRAKubeletPlugin(hwside.DRIVER, kubelet, hwside.NODE)
    await plugin.start(ctx)
    ready.set()
    try:
        await asyncio.Event().wait()
    finally:
        await plugin.stop()


async def start_floor(sock: Path, fd: int):
    server = new_server("dra")
    add_dra_services(server, lambda: DurableNoop(fd))
    await serve_unix(server, sock)
    return server


def claim() -> pb.Claim:
    return pb.Claim(namespace="default", name="scratch", uid=hwside.UID)


def run_prepare(sock: Path, n: int) -> tuple[list[float], list[float]]:
    prep, unprep = [], []
    with grpc.insecure_channel(f"unix://{sock}") as ch:
        stub = pb_grpc.DRAPluginStub(ch)
        req = pb.NodePrepareResourcesRequest(claims=[claim()])
        ureq = pb.NodeUnprepareResourcesRequest(claims=[claim()])
        for _ in range(n):
            t0 = time.perf_counter()
            r = stub.NodePrepareResources(req)
            t1 = time.perf_counter()
            u = stub.NodeUnprepareResources(ureq)
            t2 = time.perf_counter()
            assert not r.claims[hwside.UID].error and len(r.claims[hwside.UID].devices) == 2, r
            assert not u.claims[hwside.UID].error, u
            prep.append(t1 - t0)
            unprep.append(t2 - t1)
    return prep, unprep


def run_call(sock: Path, n: int, claims: list[pb.Claim]) -> list[float]:
    out = []
    with grpc.insecure_channel(f"unix://{sock}") as ch:
        stub = pb_grpc.DRAPluginStub(ch)
        req = pb.NodePrepareResourcesRequest(claims=claims)
        stub.NodePrepareResources(req)
        for _ in range(n):
            t0 = time.perf_counter()
            stub.NodePrepareResources(req)
            out.append(time.perf_counter() - t0)
    return out


def run_fdatasync(fd: int, n: int) -> list[float]:
    out, off = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        off += os.pwrite(fd, RECORD, off)
        os.fdatasync(fd)
        out.append(time.perf_counter() - t0)
    return out


def pct(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs) * 1e3, xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = 50 if args.quick else 300
    results: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    loop = Loop()
    load_before = open("/proc/loadavg").read().split()[:3]
    with tempfile.TemporaryDirectory(prefix="hwdrab-", dir="/var/tmp") as d:
        base = Path(d)
        fd = os.open(base / "floor.wal", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            (base / "real").mkdir()
            task, sock = loop.run(start_real(base / "real"))
            floor_sock = base / "floor.sock"
            floor = loop.run(start_floor(floor_sock, fd))
            for _ in range(args.rounds):  # interleaved: load drifts on a shared machine
                def add(name: str, run: Callable[[], list[float]], ops_per_sample: int = 1) -> None:
                    c0 = time.process_time()
                    xs = run()
                    cpu.setdefault(name, []).append((time.process_time() - c0) / (len(xs) * ops_per_sample))
                    results.setdefault(name, []).extend(xs)

                add("no-op gRPC", lambda: run_call(sock, n, []))
                add("durable no-op gRPC", lambda: run_call(floor_sock, n, [claim()]))
                add("fdatasync", lambda: run_fdatasync(fd, n))
                c0 = time.process_time()
                p, u = run_prepare(sock, n)
                results.setdefault("prepare", []).extend(p)
                results.setdefault("unprepare", []).extend(u)
                cpu.setdefault("prepare+unprepare", []).append((time.process_time() - c0) / n)
            loop.run(floor.stop(0))
            task.cancel()
        finally:
            os.close(fd)
            loop.close()
    print(f"DRA NodePrepareResources (v1, one claim of 2 loop disks), {args.rounds} rounds x {n}; ms; "
          f"load average {' '.join(load_before)} -> {' '.join(open('/proc/loadavg').read().split()[:3])} "
          f"on {os.cpu_count()} cpus; CPU = process utime+stime (client + server + driver) per op")
    f50, f99 = pct(results["no-op gRPC"])
    d50, d99 = pct(results["durable no-op gRPC"])
    for name in ("no-op gRPC", "fdatasync", "durable no-op gRPC", "prepare", "unprepare"):
        p50, p99 = pct(results[name])
        c = cpu.get(name) or cpu["prepare+unprepare"]
        note = " (CPU: prepare+unprepare pair)" if name in ("prepare", "unprepare") else ""
        print(f"  {name:19s} p50 {p50:7.3f}  p99 {p99:7.3f}  CPU {statistics.median(c) * 1e3:6.3f}{note}  "
              f"x no-op {p50 / f50:6.1f}/{p99 / f99:6.1f}  x durable no-op {p50 / d50:5.2f}/{p99 / d99:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
