"""`hwagent ps` benchmark: CPU time of the client and of the daemon for one listing of N pods.

A real daemon (``hwagent run``, standalone, the runtime and the probes off) starts
on a temporary root whose registry already holds N pod records, written as the
registry's store writes them (``agent.workloads.store.encode``): shared pods of one
container, Running, two events each, as a daemon without a runtime restores them
(nothing to reconcile). For each size (10, 1,000 and 10,000 pods by default) the
bench runs ``hwagent ps`` (text output to /dev/null) ``--rounds`` times and reports,
median over the rounds:

- client CPU: utime+stime of the ``hwagent ps`` process (``RUSAGE_CHILDREN``);
- daemon CPU: the sum of ``/proc/<pid>/task/*/schedstat`` run time over the
  daemon's threads (ns resolution; the daemon runs nothing else here), before and
  after the call;
- wall time of the call, and the load average before and after.

Goal (issue 24): at 10,000 pods client + daemon CPU <= 0.5 s. A loaded machine
inflates the wall time; the CPU times are what to compare. ``--format json`` measures
``hwagent ps --format json`` (issue 37 item 17: the same goal), and the JSON's size;
``--before DIR`` runs a second client checkout (its entry script ``DIR/hwagent``) against
the same daemon, interleaved round by round.

Run: .venv/bin/python bench/ps.py [--sizes 10,1000,10000] [--rounds 5] [--format json] [--before DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.contracts.pods import (  # noqa: E402
    AdmittedPod, ContainerAssignment, ContainerState, ContainerStatus, PodPhase, PodStatus,
)
from agent.cpuset import CPUSet  # noqa: E402
from agent.workloads.manifest import parse_manifest  # noqa: E402
from agent.workloads.store import PodFileStore, PodRecord, encode  # noqa: E402

from bench.scale import manifest  # noqa: E402

PY = sys.executable
HWAGENT = str(Path(PY).parent / "hwagent")
#: ``--fixture``: the daemon reads the 256-CPU, 64-node fixture of bench/scale.py (cgroups not enforced):
#: each shared pod lists the shared pool's ~250 CPUs, as on such a machine (issue 37 item 17)
FIXTURE_CONFIG = """
[daemon]
sysfs_root = "{sysfs}"
[cpu]
enforce_cgroups = false
reserved_cpus = 2
"""
CONFIG = """
[pressure]
enabled = false
[runtime]
enabled = false
[devices]
default_rules = false
hotplug = false
"""


def write_pods(root: Path, n: int, cpus: str = "0-1") -> None:
    """N records in the registry's store, as ``PodFileStore.put`` writes them (without the
    fsyncs: the bench's state need not survive a crash)."""
    store = PodFileStore(root / "workloads" / "pods", root_dir=root)
    store.prepare()
    template = parse_manifest(manifest("bg", shared=True)).pod
    now = time.time()
    for i in range(n):
        uid = f"ps-{i:05d}"
        spec = dataclasses.replace(template, name=f"web-frontend-{i:05d}", uid=uid)
        assign = {"c": ContainerAssignment(name="c", cpus=CPUSet.parse(cpus), mems=None, numa_affinity=None)}
        pod = AdmittedPod(spec=spec, qos="shared", assignments=assign, admitted_at=now - 60)
        status = PodStatus(PodPhase.RUNNING, "", "", (ContainerStatus("c", ContainerState.RUNNING, pid=1000 + i,
                                                                      started_at=now - 59),), now - 59)
        rec = PodRecord(pod, status, events=((now - 60, "admitted"), (now - 59, "started c")))
        store.path(uid).write_bytes(encode(rec))


def daemon_cpu(pid: int) -> float:
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((t / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between the listing and the read
    return total / 1e9


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Daemon:
    def __init__(self, base: Path, n: int, sysfs: Path | None = None) -> None:
        self.base, self.root = base, base / "root"
        write_pods(self.root, n, "2-255" if sysfs else "0-1")  # the fixture's shared pool: all but 2 reserved
        cfg = base / "hw.toml"
        cfg.write_text(CONFIG + (FIXTURE_CONFIG.format(sysfs=sysfs) if sysfs else ""))
        self.log = open(base / "daemon.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [HWAGENT, "run", "--config", str(cfg), "--root-dir", str(self.root), "--mode", "standalone",
             "--metrics-address", "127.0.0.1:0", "--lock-dir", str(base / "locks")],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        end = time.monotonic() + 300
        while self.ps() != 0:
            if self.proc.poll() is not None or time.monotonic() > end:
                self.stop()
                raise SystemExit(f"ps bench: the daemon did not answer; log: {base / 'daemon.log'}")
            time.sleep(0.2)

    def ps(self, entry: str = HWAGENT, fmt: str = "text") -> int:
        return subprocess.run([entry, "ps", "--root-dir", str(self.root), "--format", fmt], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=self.base).returncode

    def output(self, entry: str, fmt: str) -> bytes:
        return subprocess.run([entry, "ps", "--root-dir", str(self.root), "--format", fmt], capture_output=True,
                              cwd=self.base, check=True).stdout

    def listed(self) -> int:
        out = subprocess.run([HWAGENT, "ps", "--root-dir", str(self.root)], capture_output=True, text=True,
                             cwd=self.base, check=True).stdout
        return sum(1 for line in out.splitlines() if line.startswith("default "))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def measure(n: int, rounds: int, base: Path, fmt: str = "text",
            entries: tuple[tuple[str, str], ...] = (("", HWAGENT),), sysfs: Path | None = None,
            ) -> dict[str, dict[str, float]]:
    """Per client entry script (tag, path): median client, daemon and total CPU and wall over ``rounds``
    calls of ``ps --format fmt``, the clients interleaved; and the output's bytes."""
    d = Path(tempfile.mkdtemp(prefix=f"ps-{n}-", dir=base))
    daemon = Daemon(d, n, sysfs)
    out: dict[str, dict[str, float]] = {}
    try:
        if daemon.listed() != n:
            raise SystemExit(f"ps bench: hwagent ps did not list the {n} pods")
        runs: dict[str, list[tuple[float, float, float]]] = {tag: [] for tag, _ in entries}
        size = {tag: len(daemon.output(entry, fmt)) for tag, entry in entries}
        for _ in range(rounds):
            for tag, entry in entries:
                c0, s0, t0 = children_cpu(), daemon_cpu(daemon.proc.pid), time.perf_counter()
                if daemon.ps(entry, fmt) != 0:
                    raise SystemExit(f"ps bench: hwagent ps failed at {n} pods; log: {d / 'daemon.log'}")
                t1, c1, s1 = time.perf_counter(), children_cpu(), daemon_cpu(daemon.proc.pid)
                runs[tag].append((c1 - c0, s1 - s0, t1 - t0))
    finally:
        daemon.stop()
        shutil.rmtree(d, ignore_errors=True)
    med = statistics.median
    for tag, xs in runs.items():
        out[tag] = {"client": med(x[0] for x in xs), "daemon": med(x[1] for x in xs),
                    "total": med(x[0] + x[1] for x in xs), "wall": med(x[2] for x in xs), "bytes": size[tag]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,1000,10000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--format", choices=("text", "json"), default="text")
    ap.add_argument("--before", help="a checkout from before a change, with its entry script DIR/hwagent")
    ap.add_argument("--fixture", action="store_true", help="the daemon on the 256-CPU, 64-node fixture")
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "hwagent-bench-hwloc")
    a = ap.parse_args()
    sysfs = None
    if a.fixture:
        from bench.scale import topology

        a.cache_dir.mkdir(parents=True, exist_ok=True)
        topology(a.cache_dir)  # the fixture's sysfs tree, unpacked once
        (top,) = [p for p in (a.cache_dir / "256ia64-64n2s2c").iterdir() if p.is_dir()]
        sysfs = top / "sys"
    sizes = [int(s) for s in a.sizes.split(",")]
    entries = ((("before", str(Path(a.before) / "hwagent")),) if a.before else ()) + \
        (("after" if a.before else "", HWAGENT),)
    base = Path(tempfile.mkdtemp(prefix="hwagent-bench-ps-"))
    load0 = open("/proc/loadavg").read().split()[:3]
    rows = []
    try:
        for n in sizes:
            for tag, r in measure(n, a.rounds, base, a.format, entries, sysfs).items():
                rows.append((n, tag, r))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"hwagent ps --format {a.format}{' (256-CPU fixture)' if a.fixture else ''}, median of {a.rounds} rounds; load average {' '.join(load0)} -> "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} cpus")
    print(f"{'pods':>7} {'client':>7}  {'client CPU':>10}  {'daemon CPU':>10}  {'total CPU':>9}  {'wall':>8}  "
          f"{'output':>9}")
    for n, tag, r in rows:
        print(f"{n:>7} {tag:>7}  {r['client'] * 1e3:8.1f}ms  {r['daemon'] * 1e3:8.1f}ms  {r['total'] * 1e3:7.1f}ms  "
              f"{r['wall'] * 1e3:6.0f}ms  {r['bytes'] / 1e6:7.2f}MB")
    n, _, last = rows[-1]
    print(f"goal (issues 24, 37): at {n:,} pods client + daemon CPU <= 500 ms: "
          f"{'met' if last['total'] <= 0.5 else 'not met'} ({last['total'] * 1e3:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
