"""The NRI placer alone, in one process: what a CreateContainer's decision and a Synchronize
cost as the node fills, without the runtime, the socket or Go (bench/nri.py times the whole
round trip through containerd's NRI code; this isolates hwagent's own share of it).

Real owners over a fixture machine (2 NUMA nodes x 4 CPUs, tests/unit/workloads/admission_node):
the CPU policy with its journal on disk (``--dir``, default /tmp), the topology manager.
For N known containers: ``Placer.synchronize`` of N running Burstable containers (wall, CPU
of the loop's thread, fdatasyncs), then rounds of 10 pods created as the plugin answers a
CreateContainer (``create`` + ``pending_updates``), each timed, then released. CPU is
``time.thread_time`` of the one thread that decides (the journal's fdatasync runs on its
own thread and is counted apart as syncs).

Run: .venv/bin/python bench/nri_placer.py [--known 10 1000] [--rounds 20] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.api.nri.v1alpha1 import api_pb2 as nri  # noqa: E402
from agent.nri.placement import Placer  # noqa: E402
from tests.unit.workloads.admission_node import MACHINES, Node  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def burstable(uid: str, state: int = nri.CONTAINER_UNKNOWN) -> tuple[nri.PodSandbox, nri.Container]:
    pod = nri.PodSandbox(id=f"sb-{uid}", name=f"pod-{uid}", namespace="bench", uid=uid)
    pod.linux.cgroup_parent = f"/kubepods/burstable/pod{uid}"
    ctr = nri.Container(id=f"ct-{uid}", pod_sandbox_id=f"sb-{uid}", name="main", state=state)
    ctr.linux.resources.cpu.shares.value = 20
    return pod, ctr


async def one(known: int, rounds: int, base: Path) -> dict[str, float]:
    node = await Node(base, MACHINES[0], "single-numa-node", "container", "exclusive-cores").start()  # type: ignore[arg-type]
    try:
        placer = Placer(node.workloads.topology_manager, cpu_policy=node._engine)
        journal = node._engine.store.journal
        listed = [burstable(f"k{i}", nri.CONTAINER_RUNNING) for i in range(known)]
        syncs0, t0, c0 = journal.syncs, time.perf_counter(), time.thread_time()
        await placer.synchronize([p for p, _ in listed], [c for _, c in listed])
        sync_wall, sync_cpu = time.perf_counter() - t0, time.thread_time() - c0
        sync_fsyncs = journal.syncs - syncs0
        walls: list[float] = []
        cpus: list[float] = []
        for r in range(rounds):
            batch = [burstable(f"r{r}-{i}") for i in range(10)]
            for pod, ctr in batch:
                t0, c0 = time.perf_counter(), time.thread_time()
                await placer.create(pod, ctr)
                placer.pending_updates(exclude=ctr.id)
                walls.append(time.perf_counter() - t0)
                cpus.append(time.thread_time() - c0)
            for pod, _ in batch:
                await placer.release_pod(pod.uid)
        return {"known": known, "sync_ms": sync_wall * 1e3, "sync_cpu_ms": sync_cpu * 1e3, "sync_fsyncs": sync_fsyncs,
                "p50_ms": pct(walls, 0.5) * 1e3, "p99_ms": pct(walls, 0.99) * 1e3,
                "cpu_p50_ms": pct(cpus, 0.5) * 1e3, "cpu_mean_ms": sum(cpus) / len(cpus) * 1e3}
    finally:
        await node.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description="the NRI placer's cost per create and per Synchronize, in process")
    ap.add_argument("--known", type=int, nargs="+", default=[10, 1000])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--dir", default="/tmp", help="where the owners' journals go (the disk's fdatasync counts)")
    a = ap.parse_args()
    print(f"loadavg {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print(f"{'known':>6}{'sync ms':>9}{'sync CPU':>10}{'fsyncs':>8}{'create p50':>12}{'p99':>8}{'CPU p50':>9}{'CPU mean':>10}")
    for known in a.known:
        base = Path(tempfile.mkdtemp(prefix="hwagent-bench-placer-", dir=a.dir))
        try:
            r = asyncio.run(one(known, a.rounds, base))
        finally:
            shutil.rmtree(base, ignore_errors=True)
        print(f"{known:>6}{r['sync_ms']:>9.1f}{r['sync_cpu_ms']:>10.1f}{r['sync_fsyncs']:>8.0f}{r['p50_ms']:>12.3f}"
              f"{r['p99_ms']:>8.3f}{r['cpu_p50_ms']:>9.3f}{r['cpu_mean_ms']:>10.3f}")
    print(f"loadavg after {' '.join(Path('/proc/loadavg').read_text().split()[:3])}  (times in ms)")


if __name__ == "__main__":
    main()
