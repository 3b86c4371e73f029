"""Memory manager benchmark: Admit (and Remove) latency with memory and hugepages on vs off.

Machine: a synthetic 4-NUMA-node topology (2 sockets x 2 nodes x 8 cores x 2
threads, 64 CPUs), topology manager single-numa-node, the real CPU policy with
its journal, the registry on disk, in one process (``Workloads``, no sockets).
"On": the memory manager runs (4 nodes x 256 GiB, 16 GiB of 2 MiB pages each,
its own journal) and every pod asks for memory and hugepages; "off": no memory
manager and no hugepages (memory limits only, as before issue 25).

For each size N (10, 1,000) a fresh node gets N background pods admitted through
the same admission (shared_cores, 1 CPU request, 64Mi memory, and 2Mi of pages
"on"), then each timed pair is: Admit of a one-container dedicated_cores
numa_binding pod (1 CPU, 512Mi memory, "on": 64Mi of 2 MiB pages), and Remove of
it. Reported per call: CPU time of the process (utime+stime of every thread:
the loop and the journal's writer threads), wall time, median and mean; the
ratio on/off at each size; the load average before and after; and the floor
measured in the same run (one fdatasync-ed journal append of the CPU policy's
size, what any Admit pays at least once).

Run: .venv/bin/python bench/memory.py [--quick] [--sizes 10,1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.cpu.checkpoint import CheckpointStore  # noqa: E402
from agent.cpu.durable import DurablePolicy  # noqa: E402
from agent.cpu.policy import DynamicPolicy, PolicyOptions  # noqa: E402
from agent.memory.checkpoint import MemoryStore  # noqa: E402
from agent.memory.manager import MemoryManager  # noqa: E402
from agent.memory.policy import Capacity, StaticPolicy  # noqa: E402
from agent.topology.model import synthetic  # noqa: E402
from agent.topologymanager import TopologyManager, TopologyManagerConfig  # noqa: E402
from agent.workloads.admission import Workloads  # noqa: E402
from agent.workloads.registry import Registry  # noqa: E402
from agent.workloads.store import PodFileStore  # noqa: E402

GB = 1 << 30
CAPACITY = {n: {"memory": Capacity(256 * GB, 0, 256 * GB), "hugepages-2Mi": Capacity(16 * GB, 0, 16 * GB, 2 << 20)}
            for n in range(4)}
DEDICATED = {"katalyst.kubewharf.io/qos_level": "dedicated_cores",
             "katalyst.kubewharf.io/memory_enhancement": json.dumps({"numa_binding": "true"})}


def manifest(name: str, *, dedicated: bool, pages: bool) -> str:
    limits: dict[str, str] = {"memory": "512Mi" if dedicated else "64Mi"}
    if dedicated:
        limits["cpu"] = "1"
    if pages:
        limits["hugepages-2Mi"] = "64Mi" if dedicated else "2Mi"
    res: dict[str, object] = {"limits": limits}
    if not dedicated:
        res["requests"] = {**limits, "cpu": "100m"}
    return json.dumps({"metadata": {"name": name, "annotations": DEDICATED if dedicated else {}},
                       "spec": {"containers": [{"name": "c", "command": ["sleep", "1"], "resources": res}]}})


async def node(base: Path, on: bool) -> tuple[Workloads, list[object]]:
    topo = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=8, threads_per_core=2)
    store = CheckpointStore(base / "cpu")
    pol = DynamicPolicy(topo, PolicyOptions(reserved_count=2, dedicated_numa="exclusive-cores"))
    cpu = DurablePolicy(pol, store)
    store.save(pol.state)
    mm = None
    journals: list[object] = [store.journal]
    if on:
        mstore = MemoryStore(base / "memory")
        mm = MemoryManager(StaticPolicy(CAPACITY), mstore)
        mstore.save({}, lambda: dict(mm.policy.assignments))
        journals.append(mstore.journal)
    pods = PodFileStore(base / "pods", root_dir=base)
    tm = TopologyManager.for_topology(TopologyManagerConfig(policy="single-numa-node", scope="container"), topo)
    w = Workloads(Registry(pods), tm, topo.numa_ids, cpu_policy=cpu, memory_manager=mm,
                  machine_memory_bytes=1024 * GB)
    return w, journals


async def run_size(n: int, reps: int, base: Path, on: bool) -> dict[str, list[float]]:
    d = base / f"{'on' if on else 'off'}-{n}"
    d.mkdir()
    w, journals = await node(d, on)
    for i in range(n):
        await w.admit_manifest(manifest(f"bg-{i}", dedicated=False, pages=on))
    out: dict[str, list[float]] = {"admit_cpu": [], "admit_wall": [], "remove_cpu": [], "remove_wall": []}
    for i in range(reps):
        m = manifest(f"timed-{i}", dedicated=True, pages=on)
        c0, t0 = time.process_time(), time.perf_counter()
        await w.admit_manifest(m)
        c1, t1 = time.process_time(), time.perf_counter()
        await w.remove(f"timed-{i}")
        c2, t2 = time.process_time(), time.perf_counter()
        out["admit_cpu"].append(c1 - c0)
        out["admit_wall"].append(t1 - t0)
        out["remove_cpu"].append(c2 - c1)
        out["remove_wall"].append(t2 - t1)
    await w.drain()
    for j in journals:
        await j.close()  # type: ignore[attr-defined]
    return out


async def floor(base: Path, reps: int) -> tuple[float, float]:
    """CPU and wall of one fdatasync-ed journal append (the CPU policy's own journal)."""
    w, journals = await node(base / "floor", False)
    j = journals[0]
    cpu, wall = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        await j.barrier()  # type: ignore[attr-defined]
        await j.append(b'{"put":[]}')  # type: ignore[attr-defined]
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    for x in journals:
        await x.close()  # type: ignore[attr-defined]
    del w
    return statistics.median(cpu), statistics.median(wall)


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:6.2f} / {statistics.fmean(xs) * 1e3:6.2f}"


async def main(sizes: list[int], reps: int) -> int:
    base = Path(tempfile.mkdtemp(prefix="bench-memory-", dir="/var/tmp"))
    load0 = os.getloadavg()
    rows = []
    try:
        (base / "floor").mkdir()
        fl = await floor(base, reps)
        for n in sizes:
            for on in (False, True):
                t = time.perf_counter()
                rows.append((n, on, await run_size(n, reps, base, on)))
                print(f"  {n} pods {'on' if on else 'off'} done in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    load1 = os.getloadavg()
    print(f"memory: synthetic 4 NUMA nodes x 16 CPUs, single-numa-node, in-process admission + CPU policy + "
          f"journals; {reps} Admit+Remove pairs per row")
    print(f"load average before {load0[0]:.2f} {load0[1]:.2f}, after {load1[0]:.2f} {load1[1]:.2f}; floor (one "
          f"synced journal append): CPU {fl[0] * 1e3:.2f} ms, wall {fl[1] * 1e3:.2f} ms")
    print(f"  {'pods':>5} {'memory':>6}  {'Admit CPU ms p50/mean':>21}  {'wall p50/mean':>15}  "
          f"{'Remove CPU ms p50/mean':>22}  {'wall p50/mean':>15}")
    by = {(n, on): r for n, on, r in rows}
    for n, on, r in rows:
        print(f"  {n:>5} {'on' if on else 'off':>6}  {ms(r['admit_cpu']):>21}  {ms(r['admit_wall']):>15}  "
              f"{ms(r['remove_cpu']):>22}  {ms(r['remove_wall']):>15}")
    for n in sizes:
        with_mm, without = by[(n, True)], by[(n, False)]
        ra = statistics.median(with_mm["admit_cpu"]) / statistics.median(without["admit_cpu"])
        rw = statistics.median(with_mm["admit_wall"]) / statistics.median(without["admit_wall"])
        rr = statistics.median(with_mm["remove_cpu"]) / statistics.median(without["remove_cpu"])
        print(f"  ratio on/off at {n} pods: Admit CPU {ra:.2f}x, Admit wall {rw:.2f}x, Remove CPU {rr:.2f}x")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 pairs per row instead of 40")
    ap.add_argument("--sizes", default="10,1000", help="comma-separated background pod counts")
    a = ap.parse_args()
    sys.exit(asyncio.run(main([int(s) for s in a.sizes.split(",")], 10 if a.quick else 40)))
