"""Restart benchmark: what a start costs to restore N pods of durable state.

A builder process makes N pods of state through the real owners, on the
256-CPU, 64-NUMA-node fixture of bench/scale.py:

- the CPU policy (``DynamicPolicy`` + ``CheckpointStore``): N containers (90 %
  shared, a third of them in pool "batch", 10 % reclaimed) in the snapshot, then
  ``churn`` Allocate + RemovePod pairs of extra pods through ``DurablePolicy``,
  so the journal holds 2 x churn records to replay;
- the device host (``DeviceManager``'s journal, ``agent.devicemanager.checkpoint``):
  one device of resource ``example.com/dev`` per pod in the snapshot, then churn
  Allocate + release records;
- the workload registry (``PodFileStore``): one record file per pod.

It prints its RSS holding that state as a daemon holds it (the device manager's
table, each pod's own record objects; VmRSS after a gc and after glibc's free pages
are returned, as the daemon does after each snapshot: the steady state).
Then a fresh process restarts from the files as the components do at start,
each step timed with CPU time (utime+stime of the process, every thread) and
wall time: CPU ``store.load`` + ``DynamicPolicy(state=...)`` + ``store.open`` (the
journal kept as recovered, as the component does); ``DeviceManager.start`` (recover + restore + resume); ``PodFileStore.load``
+ ``Registry.restore``. It prints CPU per pod, VmRSS after (holding the restored
state, after a gc) and VmHWM, against the builder's steady RSS; then, apart, the CPU
journal's compaction that the component runs on its first periodic pass after READY.
Goal (issue 24): <= 0.1 ms CPU per pod at 10,000 pods; RSS after = steady +- 10 %.

Run: .venv/bin/python bench/restart.py [--pods 10000] [--churn 500]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.contracts.cpu import Request  # noqa: E402
from agent.contracts.devices import Allocation, CheckpointData  # noqa: E402
from agent.cpu.calculator import TopoIndex  # noqa: E402
from agent.cpu.checkpoint import CheckpointStore  # noqa: E402
from agent.cpu.durable import DurablePolicy  # noqa: E402
from agent.cpu.policy import DynamicPolicy, PolicyOptions  # noqa: E402
from agent.devicemanager.checkpoint import open_journal, record_allocate, record_release  # noqa: E402
from agent.devicemanager.manager import DeviceManager  # noqa: E402
from agent.journal import parse_frames  # noqa: E402
from agent.rootpaths import DEVICE_CHECKPOINT  # noqa: E402
from agent.statefile import release_freed_memory  # noqa: E402
from agent.workloads.component import STATE_DIR  # noqa: E402
from agent.workloads.registry import Registry  # noqa: E402
from agent.workloads.store import PodFileStore  # noqa: E402
from agent.workloads.store import decode as decode_record, encode as encode_record  # noqa: E402

from bench.scale import Clock, background, topology  # noqa: E402

RESOURCE = "example.com/dev"
#: where the daemon keeps each owner's state under its root dir (the builder writes a daemon's root)
DEVICES = Path("device-plugins") / DEVICE_CHECKPOINT
PODS = Path(*STATE_DIR)
OPTIONS = PolicyOptions(reserved_count=2, transition_period_s=30)


def status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def device(uid: str, i: int) -> Allocation:
    return Allocation(pod_uid=uid, pod_namespace="default", pod_name=uid, container_name="c", container_type="app",
                      resource=RESOURCE, devices=((f"dev-{i:05d}", (i % 64,)),), response=b"\x0a\x00")


async def build(d: Path, n: int, churn: int, cache: Path) -> dict[str, float]:
    topo = topology(cache)
    clock = Clock()
    policy = DynamicPolicy(topo, OPTIONS, clock=clock)
    records = background(policy, clock, n)
    store = CheckpointStore(d / "cpu", online=TopoIndex(topo).all)
    store.save(policy.state, lambda: engine.policy.state)
    engine = DurablePolicy(policy, store)
    for i in range(churn):
        uid = f"churn-{i}"
        await engine.allocate(Request(pod_uid=uid, container_name="c", pod_namespace="default", pod_name=uid,
                                      resource_requests={"cpu": 0.1}))
        await engine.release_pod(uid)
    await engine.wait_durable()
    await store.journal.close()

    allocs = [device(r.uid, i) for i, r in enumerate(records)]
    ids = tuple(f"dev-{i:05d}" for i in range(n + 1))
    cp = CheckpointData(allocations=tuple(allocs), registered={RESOURCE: ids})
    j = open_journal(d / DEVICES)
    j.recover()
    j.start(cp)
    for i in range(churn):
        uid = f"churn-{i}"
        await j.append(record_allocate([device(uid, n)]))
        await j.append(record_release(uid))
    await j.close()

    # the steady state holds what a running daemon holds: the device manager's table, and
    # records whose parts are each pod's own (a daemon parses every pod's manifest; the
    # bench's template shares them), so the restart is compared with like
    held = DeviceManager(numa_ids=topo.numa_ids, checkpoint_path=None)
    held.restore(cp)
    pods = PodFileStore(d / PODS, root_dir=d)
    for r in records:
        pods.put(r)
    registry = Registry(pods, clock=clock)
    registry.restore([decode_record(encode_record(r)) for r in records])
    del allocs, cp, records
    gc.collect()
    release_freed_memory()  # as the daemon does after each snapshot: what is left is what is held
    return {"rss_kb": status_kb("VmRSS"), "containers": len(policy.state.entries)}


async def restart(d: Path, cache: Path) -> dict[str, float]:
    topo = topology(cache)  # the daemon has its topology before the owners start
    gc.collect()
    out: dict[str, float] = {"rss0_kb": status_kb("VmRSS")}
    loop = asyncio.get_running_loop()

    # the floor: read every file the owners read and parse its JSON (snapshots, records,
    # journal payloads), building nothing and checking nothing
    c0, t0 = cpu_s(), time.perf_counter()
    for f in sorted(p for p in d.rglob("*") if p.is_file()):
        raw = f.read_bytes()
        if f.suffix == ".wal":
            for _seq, payload, _end in parse_frames(raw)[0]:
                json.loads(payload)
        else:
            json.loads(raw)
    out |= {"floor": cpu_s() - c0, "floor_wall": time.perf_counter() - t0}
    del raw
    gc.collect()
    release_freed_memory()  # what the floor parsed is not the restore's
    out["rss0_kb"] = status_kb("VmRSS")

    c0, t0 = cpu_s(), time.perf_counter()
    store = CheckpointStore(d / "cpu", online=TopoIndex(topo).all)
    state = await loop.run_in_executor(None, store.load, False)
    c1 = cpu_s()
    policy = DynamicPolicy(topo, OPTIONS, state=state, clock=Clock())
    c2 = cpu_s()
    compact_due = await loop.run_in_executor(None, store.open, state, policy.state, lambda: policy.state)
    c3, t3 = cpu_s(), time.perf_counter()
    gc.collect()
    out["rss_cpu_kb"] = status_kb("VmRSS")
    out |= {"cpu_load": c1 - c0, "cpu_policy": c2 - c1, "cpu_start": c3 - c2, "cpu_wall": t3 - t0,
            "replayed": store.last_recovery.replayed if store.last_recovery else 0}

    c0, t0 = cpu_s(), time.perf_counter()
    dm = DeviceManager(numa_ids=topo.numa_ids, checkpoint_path=d / DEVICES)
    await dm.start()
    out |= {"dev": cpu_s() - c0, "dev_wall": time.perf_counter() - t0}
    gc.collect()
    out["rss_dev_kb"] = status_kb("VmRSS")

    c0, t0 = cpu_s(), time.perf_counter()
    pods = PodFileStore(d / PODS, root_dir=d)
    records = await loop.run_in_executor(None, pods.load)
    registry = Registry(pods, clock=Clock())
    registry.restore(records)
    out |= {"reg": cpu_s() - c0, "reg_wall": time.perf_counter() - t0}
    del records
    gc.collect()
    out |= {"rss_kb": status_kb("VmRSS"), "hwm_kb": status_kb("VmHWM"),
            "allocations": len(list(dm._table)),
            "containers": len(policy.state.entries), "pods": len(registry)}
    # what the component does on its first periodic pass, after READY: compact the replayed journal
    c0, t0 = cpu_s(), time.perf_counter()
    if compact_due:
        store.journal.request_snapshot()
        await store.journal.drain()
    out |= {"compact": cpu_s() - c0, "compact_wall": time.perf_counter() - t0, "compacted": compact_due}
    gc.collect()
    out["rss_compacted_kb"] = status_kb("VmRSS")
    await dm.stop()
    await store.journal.close()
    return out


DAEMON_CONFIG = """
[daemon]
sysfs_root = "{sysfs}"
[pressure]
enabled = false
[runtime]
enabled = false
[devices]
default_rules = false
hotplug = false
[cpu]
enforce_cgroups = false
reserved_cpus = 2
cpuset_check_interval_s = 1
"""
#: ``--all-components``: every component the defaults run (the pressure probes, device rules and hotplug,
#: memory manager, advisor, metrics, status, the CLI's API) but the runtime, which would start the
#: builder's admitted pods (thousands of processes); cgroups not enforced (the fixture's CPUs are not this
#: machine's)
DAEMON_CONFIG_ALL = """
[daemon]
sysfs_root = "{sysfs}"
[runtime]
enabled = false
[cpu]
enforce_cgroups = false
reserved_cpus = 2
cpuset_check_interval_s = 1
"""


def daemon_run(d: Path, cache: Path, settle_s: float, config: str = DAEMON_CONFIG, entry: str = "") -> dict[str, float]:
    """A real ``hwagent run`` on the root the builder wrote (the 256-CPU fixture's sysfs,
    cgroups not enforced, runtime and probes off): CPU (every thread of it and its
    descendants) and VmRSS at READY=1, then VmRSS again ``settle_s`` later (past its
    first periodic pass, which compacts the CPU journal it replayed)."""
    from bench.daemon import rss_mb, tree_cpu_ms

    (top,) = [p for p in (cache / "256ia64-64n2s2c").iterdir() if p.is_dir()]
    cfg = d / "hw.toml"
    cfg.write_text(config.format(sysfs=top / "sys"))
    notify = d / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify))
    sock.settimeout(1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"NOTIFY_SOCKET": str(notify)}
    hwagent = entry or str(Path(sys.executable).parent / "hwagent")
    t0 = time.perf_counter()
    proc = subprocess.Popen([hwagent, "run", "--config", str(cfg), "--root-dir", str(d / "root"), "--mode",
                             "standalone", "--metrics-address", "127.0.0.1:0", "--lock-dir", str(d / "locks")],
                            cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(d / "daemon.log", "wb"))  # noqa: SIM115 - the child holds it
    try:
        msg = b""
        while b"READY=1" not in msg:
            if proc.poll() is not None or time.perf_counter() - t0 > 300:
                raise SystemExit(f"restart bench: no READY from the daemon (exit {proc.returncode}); "
                                 f"log {d / 'daemon.log'}")
            try:
                msg = sock.recv(65536)
            except TimeoutError:
                continue
        wall = time.perf_counter() - t0
        os.kill(proc.pid, signal.SIGSTOP)  # what it did up to READY, not what it goes on doing
        try:
            cpu, rss = tree_cpu_ms(proc.pid), rss_mb(proc.pid)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        time.sleep(settle_s)
        settled = rss_mb(proc.pid)
        proc.send_signal(signal.SIGTERM)
        if proc.wait(120) != 0:
            raise SystemExit(f"restart bench: the daemon exited {proc.returncode}; log {d / 'daemon.log'}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()
    return {"wall": wall, "cpu_ms": cpu, "rss_mb": rss, "settled_mb": settled}


def bench_daemon(sizes: list[int], churn: int, cache: Path, rounds: int, config: str = DAEMON_CONFIG,
                 before: str = "") -> None:
    """Daemon RSS and CPU to READY with each size of state, median of ``rounds`` starts
    (each on a fresh copy of the built root: a start compacts what it replayed). ``before``: a
    second checkout's entry script, started on the same built roots, alternating with this one."""
    if before:
        bench_before_after(sizes, churn, cache, rounds, config, before)
        return
    rows = []
    load0 = os.getloadavg()[0]
    for n in sizes:
        base = Path(tempfile.mkdtemp(prefix=f"bench-restartd-{n}-", dir="/var/tmp"))
        try:
            cmd = [sys.executable, __file__, "--phase", "build", "--dir", str(base / "built"), "--pods", str(n),
                   "--churn", str(churn), "--cache-dir", str(cache)]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            runs = []
            for i in range(rounds):
                d = base / f"run-{i}"
                d.mkdir()
                shutil.copytree(base / "built", d / "root")
                runs.append(daemon_run(d, cache, settle_s=3.0, config=config))
        except SystemExit:
            print(f"kept for a look: {base}", file=sys.stderr)
            raise
        shutil.rmtree(base, ignore_errors=True)
        rows.append((n, {k: statistics.median(r[k] for r in runs) for k in runs[0]}))
    what = "runtime and probes off" if config == DAEMON_CONFIG else "every component but the runtime"
    print(f"daemon (hwagent run, 256-CPU fixture, {what}), process start to READY=1, median of {rounds} starts "
          f"per size; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"  {'pods':>6}  {'CPU to READY':>12}  {'wall':>8}  {'RSS at READY':>12}  {'RSS 3 s later':>13}")
    for n, r in rows:
        print(f"  {n:>6}  {r['cpu_ms']:>9.1f} ms  {r['wall'] * 1e3:>5.0f} ms  {r['rss_mb']:>9.1f} MB  "
              f"{r['settled_mb']:>10.1f} MB")
    (n0, a), (n1, b) = rows[0], rows[-1]
    per_pod = (b["cpu_ms"] - a["cpu_ms"]) / (n1 - n0) if n1 > n0 else 0.0
    print(f"daemon CPU to READY per pod, {n1:,} over {n0:,}: {per_pod:.3f} ms (goal <= 0.1): "
          f"{'met' if per_pod <= 0.1 else 'NOT met'}")
    ratio = b["settled_mb"] / a["settled_mb"]
    print(f"daemon RSS at {n1:,} pods vs {n0:,}: {ratio:.2f}x settled, {b['rss_mb'] / a['rss_mb']:.2f}x at READY "
          f"(goal <= 2x): {'met' if ratio <= 2 else 'NOT met'}")


def bench_before_after(sizes: list[int], churn: int, cache: Path, rounds: int, config: str, before: str) -> None:
    """CPU to READY of two checkouts on the same state, started alternately (a loaded machine moves
    both alike): per size, median of ``rounds`` starts each; then the CPU per pod over the first size."""
    after = str(Path(sys.executable).parent / "hwagent")
    cpu: dict[tuple[str, int], list[float]] = {}
    wall: dict[tuple[str, int], list[float]] = {}
    load0 = open("/proc/loadavg").read().split()[:3]
    for n in sizes:
        base = Path(tempfile.mkdtemp(prefix=f"bench-restartd-{n}-", dir="/var/tmp"))
        try:
            cmd = [sys.executable, __file__, "--phase", "build", "--dir", str(base / "built"), "--pods", str(n),
                   "--churn", str(churn), "--cache-dir", str(cache)]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for i in range(rounds):
                for tag, entry in (("before", before), ("after", after)):
                    d = base / f"run-{tag}-{i}"
                    d.mkdir()
                    shutil.copytree(base / "built", d / "root")
                    r = daemon_run(d, cache, settle_s=0.0, config=config, entry=entry)
                    cpu.setdefault((tag, n), []).append(r["cpu_ms"])
                    wall.setdefault((tag, n), []).append(r["wall"] * 1e3)
                    shutil.rmtree(d, ignore_errors=True)
        finally:
            shutil.rmtree(base, ignore_errors=True)
    med = statistics.median
    print(f"daemon, process start to READY=1 (256-CPU fixture, "
          f"{'runtime and probes off' if config == DAEMON_CONFIG else 'every component but the runtime'}), "
          f"before/after alternating, median of {rounds} starts; load average {' '.join(load0)} -> "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}")
    for tag in ("before", "after"):
        cells = "  ".join(f"{n:>6} pods {med(cpu[(tag, n)]):7.1f} ms CPU {med(wall[(tag, n)]):6.0f} ms wall"
                          for n in sizes)
        n0, n1 = sizes[0], sizes[-1]
        per = (med(cpu[(tag, n1)]) - med(cpu[(tag, n0)])) / (n1 - n0) if n1 > n0 else 0.0
        print(f"  {tag:6s}  {cells}   per pod over {n0}: {per:.3f} ms (goal <= 0.1)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--churn", type=int, default=500, help="Allocate+release pairs journaled after the snapshot")
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "hwagent-bench-hwloc")
    ap.add_argument("--phase", choices=("build", "restart"), help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--daemon", metavar="SIZES",
                    help="instead: a real daemon's CPU to READY and RSS with each size of state, e.g. 10,10000")
    ap.add_argument("--rounds", type=int, default=3, help="starts per size with --daemon")
    ap.add_argument("--before", metavar="DIR", help="with --daemon: a checkout from before a change (its entry "
                    "script DIR/hwagent) started alternately with this one on the same state")
    ap.add_argument("--all-components", action="store_true",
                    help="with --daemon: every component the defaults run but the runtime (else probes off too)")
    a = ap.parse_args()
    a.cache_dir.mkdir(parents=True, exist_ok=True)
    if a.daemon:
        topology(a.cache_dir)  # the fixture's sysfs tree, unpacked once
        bench_daemon([int(x) for x in a.daemon.split(",")], a.churn, a.cache_dir, a.rounds,
                     DAEMON_CONFIG_ALL if a.all_components else DAEMON_CONFIG,
                     str(Path(a.before) / "hwagent") if a.before else "")
        return 0
    if a.phase == "build":
        print(json.dumps(asyncio.run(build(a.dir, a.pods, a.churn, a.cache_dir))))
        return 0
    if a.phase == "restart":
        print(json.dumps(asyncio.run(restart(a.dir, a.cache_dir))))
        return 0
    d = Path(tempfile.mkdtemp(prefix="bench-restart-", dir="/var/tmp"))
    try:
        def phase(name: str) -> dict[str, float]:
            cmd = [sys.executable, __file__, "--phase", name, "--dir", str(d), "--pods", str(a.pods),
                   "--churn", str(a.churn), "--cache-dir", str(a.cache_dir)]
            return json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)

        load0 = os.getloadavg()[0]
        b = phase("build")
        r = phase("restart")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    n = a.pods
    cpu_total = r["cpu_load"] + r["cpu_policy"] + r["cpu_start"] + r["dev"] + r["reg"]
    print(f"restart: {n} pods ({b['containers']} CPU containers, {n} device allocations, {n} registry records), "
          f"journals of {2 * a.churn} records each; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"  CPU policy   load {r['cpu_load'] * 1e3:7.1f} ms  policy {r['cpu_policy'] * 1e3:6.1f} ms  "
          f"journal start {r['cpu_start'] * 1e3:6.1f} ms  (wall {r['cpu_wall'] * 1e3:7.1f} ms, "
          f"{int(r['replayed'])} records replayed)")
    print(f"  device host  start {r['dev'] * 1e3:7.1f} ms CPU  (wall {r['dev_wall'] * 1e3:7.1f} ms)")
    print(f"  registry     load+restore {r['reg'] * 1e3:7.1f} ms CPU  (wall {r['reg_wall'] * 1e3:7.1f} ms)")
    print(f"  total {cpu_total * 1e3:.1f} ms CPU = {cpu_total / n * 1e3:.3f} ms per pod (goal <= 0.1); floor (read "
          f"and JSON-parse the same files) {r['floor'] * 1e3:.1f} ms CPU (wall {r['floor_wall'] * 1e3:.1f} ms): "
          f"{cpu_total / r['floor']:.1f}x")
    if r["compacted"]:
        print(f"  after READY: CPU journal compaction {r['compact'] * 1e3:.1f} ms CPU (wall {r['compact_wall'] * 1e3:.1f} ms)"
              f" = {(cpu_total + r['compact']) / n * 1e3:.3f} ms per pod with it; RSS after it "
              f"{r['rss_compacted_kb'] / 1024:.1f} MB = {r['rss_compacted_kb'] / b['rss_kb']:.2f}x steady")
    print(f"  RSS steady (builder, holding the state) {b['rss_kb'] / 1024:.1f} MB; after restart "
          f"{r['rss_kb'] / 1024:.1f} MB = {r['rss_kb'] / b['rss_kb']:.2f}x (goal 0.9-1.1x); peak {r['hwm_kb'] / 1024:.1f} MB; "
          f"before restoring {r['rss0_kb'] / 1024:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
