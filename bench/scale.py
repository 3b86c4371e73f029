"""Scaling benchmark: CPU time of one dedicated Admit and one Remove as the node fills up.

Machine: the 256-CPU, 64-NUMA-node hwloc snapshot ``256ia64-64n2s2c`` from
tests/fixtures/hwloc-linux (read through agent.topology.sysfs), 2 reserved
CPUs, topology manager single-numa-node. For each size N (10, 100, 1,000,
10,000) a fresh node is set up on a temporary directory with N pods already
admitted: 90 % shared_cores (a third in pool "batch", ramp-up over, so they
follow their pool) and 10 % reclaimed_cores, written as the CPU policy's
snapshot and the registry's records. Then, in process, through the real
admission (``Workloads``: manifest, topology manager, the CPU policy's plan and
Allocate, the policy's journal with its fdatasync, the registry's record
write) each timed pair is:

- Admit of a one-container dedicated_cores numa_binding pod (1 CPU): its NUMA
  node leaves the shared pools, which move;
- Remove of that pod: the node comes back, the pools move again.

Reported per call: the process's CPU time (utime+stime of every thread of the
one process involved: the loop and the executor threads that write and sync)
and wall time, median and mean; the load average before and after. The peer
is the same call at 10 pods, measured in the same run: the growth ratio at N
is CPU(N) / CPU(10). The goal (issue 24): at 10,000 pods <= 1.2x.

Run: .venv/bin/python bench/scale.py [--quick] [--sizes 10,100,1000,10000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.contracts.cpu import Request  # noqa: E402
from agent.contracts.pods import AdmittedPod, ContainerAssignment, PodStatus  # noqa: E402
from agent.cpu.checkpoint import CheckpointStore  # noqa: E402
from agent.cpu.durable import DurablePolicy  # noqa: E402
from agent.cpu.policy import DynamicPolicy, PolicyOptions  # noqa: E402
from agent.cpu.qos import CPU_ENHANCEMENT_KEY, QOS_KEY  # noqa: E402
from agent.topology.sysfs import read_topology  # noqa: E402
from agent.topologymanager import TopologyManager, TopologyManagerConfig  # noqa: E402
from agent.workloads.admission import Workloads  # noqa: E402
from agent.workloads.manifest import parse_manifest  # noqa: E402
from agent.workloads.registry import ADMITTED, Registry  # noqa: E402
from agent.workloads.store import PodFileStore, PodRecord  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hwloc-linux"
SNAPSHOT = "256ia64-64n2s2c"
BINDING = {"katalyst.kubewharf.io/qos_level": "dedicated_cores",
           "katalyst.kubewharf.io/memory_enhancement": json.dumps({"numa_binding": "true"})}
GOAL = 1.2


class Clock:
    t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def topology(cache: Path):
    dest = cache / SNAPSHOT
    if not dest.exists():
        with tarfile.open(FIXTURES / f"{SNAPSHOT}.tar.bz2") as tf:
            tf.chown = lambda *a, **k: None  # type: ignore[method-assign]
            kwargs = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
            tf.extractall(dest, **kwargs)
    (top,) = [p for p in dest.iterdir() if p.is_dir()]
    return read_topology(str(top / "sys"), str(top / "proc"), self_cgroup=False)


def manifest(name: str, shared: bool = False) -> bytes:
    if shared:
        doc = {"metadata": {"name": name}, "spec": {"containers": [
            {"name": "c", "command": ["sleep", "1"], "resources": {"requests": {"cpu": "100m"}}}]}}
    else:
        doc = {"metadata": {"name": name, "annotations": BINDING}, "spec": {"containers": [
            {"name": "c", "command": ["sleep", "1"], "resources": {"limits": {"cpu": "1"}}}]}}
    return json.dumps(doc).encode()


def background(policy: DynamicPolicy, clock: Clock, n: int) -> list[PodRecord]:
    """``n`` pods admitted before the run: the CPU policy's entries (its own Allocate)
    and the registry's records, ramp-up over."""
    template = parse_manifest(manifest("bg", shared=True)).pod
    records = []
    for i in range(n):
        uid = f"bg-{i:05d}"
        ann = {}
        if i % 10 == 9:
            ann = {QOS_KEY: "reclaimed_cores"}
        elif i % 3 == 0:
            ann = {CPU_ENHANCEMENT_KEY: json.dumps({"cpuset_pool": "batch"})}
        res = policy.allocate(Request(pod_uid=uid, container_name="c", pod_namespace="default", pod_name=uid,
                                      resource_requests={"cpu": 0.1}, annotations=ann))
        assert res.allocation is not None
        spec = dataclasses.replace(template, name=uid, uid=uid, annotations=ann)
        qos = "reclaimed" if ann.get(QOS_KEY) else "shared"
        assign = {"c": ContainerAssignment(name="c", cpus=res.allocation.cpuset, mems=None, numa_affinity=None)}
        pod = AdmittedPod(spec=spec, qos=qos, assignments=assign, admitted_at=clock())
        records.append(PodRecord(pod, PodStatus(reason=ADMITTED)))
    clock.t += 60
    policy.complete_ramp_up()
    policy.pod_running = lambda uid: True
    return records


async def run_size(topo, n: int, reps: int, base: Path) -> dict[str, list[float]]:
    d = Path(tempfile.mkdtemp(prefix=f"scale-{n}-", dir=base))
    clock = Clock()
    policy = DynamicPolicy(topo, PolicyOptions(reserved_count=2, transition_period_s=30), clock=clock)
    records = background(policy, clock, n)
    store = CheckpointStore(d / "cpu")
    store.save(policy.state)  # snapshot + open journal, as the CPU component does at start
    engine = DurablePolicy(policy, store)
    cpu = engine
    registry = Registry(PodFileStore(d / "pods"), clock=clock)
    registry.restore(records)
    tm = TopologyManager(TopologyManagerConfig(policy="single-numa-node", max_allowable_numa_nodes=64),
                         topo.numa_ids)
    w = Workloads(registry, tm, topo.numa_ids, cpu_policy=cpu, clock=clock)
    out: dict[str, list[float]] = {"admit_cpu": [], "admit_wall": [], "remove_cpu": [], "remove_wall": []}

    async def pair(i: int, keep: bool) -> None:
        raw = manifest(f"m-{i}")
        c0, t0 = time.process_time(), time.perf_counter()
        await w.admit_manifest(raw)
        c1, t1 = time.process_time(), time.perf_counter()
        await w.remove(f"m-{i}")
        c2, t2 = time.process_time(), time.perf_counter()
        if keep:
            out["admit_cpu"].append(c1 - c0)
            out["admit_wall"].append(t1 - t0)
            out["remove_cpu"].append(c2 - c1)
            out["remove_wall"].append(t2 - t1)

    for i in range(5):  # warm-up: caches, the first journal appends
        await pair(-1 - i, False)
    for i in range(reps):
        await pair(i, True)
    assert len(registry) == n and len(policy.state.entries) == n
    await engine.wait_durable()
    await store.journal.close()
    shutil.rmtree(d, ignore_errors=True)
    return out


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:7.2f} / {statistics.fmean(xs) * 1e3:7.2f}"


async def main(sizes: list[int], reps: int, cache: Path) -> int:
    topo = topology(cache)
    base = Path(tempfile.mkdtemp(prefix="bench-scale-", dir="/var/tmp"))
    load0 = os.getloadavg()
    rows = []
    try:
        for n in sizes:
            t = time.perf_counter()
            r = await run_size(topo, n, reps, base)
            rows.append((n, r))
            print(f"  {n} pods done in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    load1 = os.getloadavg()
    print(f"scale: {SNAPSHOT} ({len(topo.cpus)} cpus, {len(topo.numa_ids)} NUMA nodes), in-process admission + "
          f"CPU policy + journal; {reps} Admit+Remove pairs per size")
    print(f"load average before {load0[0]:.1f} {load0[1]:.1f}, after {load1[0]:.1f} {load1[1]:.1f} "
          f"(2-core box: wall time inflates with load, CPU time much less)")
    print(f"  {'pods':>6}  {'Admit CPU ms p50/mean':>22}  {'wall p50/mean':>17}  "
          f"{'Remove CPU ms p50/mean':>23}  {'wall p50/mean':>17}  {'CPU vs 10 pods (Admit, Remove)':>31}")
    ref = rows[0][1]
    worst = 0.0
    for n, r in rows:
        ga = statistics.median(r["admit_cpu"]) / statistics.median(ref["admit_cpu"])
        gr = statistics.median(r["remove_cpu"]) / statistics.median(ref["remove_cpu"])
        worst = max(worst, ga, gr) if n == sizes[-1] else worst
        print(f"  {n:>6}  {ms(r['admit_cpu']):>22}  {ms(r['admit_wall']):>17}  {ms(r['remove_cpu']):>23}  "
              f"{ms(r['remove_wall']):>17}  {ga:>14.2f}x {gr:>6.2f}x")
    print(f"growth {sizes[-1]} vs {sizes[0]} pods: {worst:.2f}x (goal <= {GOAL}x): "
          + ("met" if worst <= GOAL else "NOT met"))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 pairs per size instead of 40")
    ap.add_argument("--sizes", default="10,100,1000,10000", help="comma-separated pod counts (first is the peer)")
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "hwagent-bench-hwloc")
    a = ap.parse_args()
    a.cache_dir.mkdir(parents=True, exist_ok=True)
    sys.exit(asyncio.run(main([int(s) for s in a.sizes.split(",")], 10 if a.quick else 40, a.cache_dir)))
