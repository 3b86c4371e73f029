"""CLI benchmark: CPU and wall time of one job through hwagent against Slurm, and of
`hwagent ps` against the interpreter starting and doing nothing.

Measured side by side, interleaved round by round, in one run:

- ``hwagent launch --wait --rm -q -- true``: a one-CPU job run to its end and removed;
- ``srun -n1 -c1 --cpu-bind=cores true`` on a single-node Slurm (task/cgroup,
  proctrack/cgroup; ``--setup-slurm`` writes a minimal config under a temporary
  directory and starts munged, slurmctld and slurmd; without Slurm this row is
  skipped with the reason);
- ``hwagent ps`` (one pod listed: none; the daemon is up) and ``python -c pass``
  with the same interpreter, and ``python -S -c pass``: the floor of the checkout's
  entry script (agent/commands/_entry.py), which starts the commands that only talk
  to the daemon without ``site``.

CPU time is utime + stime of every process involved: the client's from
``getrusage(RUSAGE_CHILDREN)``; the servers' from cpuacct: the daemon (and the
workloads it runs, whose cgroups live under its own) and slurmctld + slurmd
(+ every slurmstepd and task they fork, which slurm's cgroup plugins leave in
cpuacct) each run in a cpuacct cgroup of this bench's own, whose usage keeps what
children that come and go were charged. The servers' idle CPU over the same
time is reported beside; a loaded machine inflates everything, so the load
average is printed and the ratios are what to compare.

Run: scripts/dev bench cli [--rounds 50] [--setup-slurm]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
PY = sys.executable
HWAGENT = str(Path(PY).parent / "hwagent")

DAEMON_CONFIG = """
[pressure]
enabled = false
[devices]
default_rules = false
hotplug = false
[cgroups]
runtime_subtree = "{subtree}/pods"
"""


class Acct:
    """A cpuacct cgroup of the bench's own: CPU seconds charged to everything in it."""

    def __init__(self, name: str) -> None:
        self.path = CPUACCT / name
        self.path.mkdir(exist_ok=True)

    def enter_argv(self, argv: list[str]) -> list[str]:
        """``argv`` started inside this cgroup (the shell joins it, then execs)."""
        return ["sh", "-c", f'echo $$ > {self.path}/cgroup.procs && exec "$@"', "sh", *argv]

    def seconds(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        """Remove the tree bottom-up (the processes in it are gone by now)."""
        for d in sorted((p for p in self.path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            try:
                d.rmdir()
            except OSError:
                pass
        try:
            self.path.rmdir()
        except OSError as e:
            print(f"  note: could not remove {self.path}: {e.strerror}", file=sys.stderr)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    raise SystemExit(f"cli bench: {what} did not happen within {timeout:.0f} s")


# --- hwagent -------------------------------------------------------------------------


class Hwagent:
    def __init__(self, base: Path) -> None:
        self.base = base
        base.mkdir(parents=True)
        self.acct = Acct(f"hwagent-bench-cli-{os.getpid()}")
        subtree = "/" + self.acct.path.name
        cfg = base / "hw.toml"
        cfg.write_text(DAEMON_CONFIG.format(subtree=subtree))
        self.root = base / "root"
        self.log = open(base / "daemon.log", "wb")  # noqa: SIM115 - closed in stop()
        argv = [HWAGENT, "run", "--config", str(cfg), "--root-dir", str(self.root), "--mode", "standalone",
                "--metrics-address", "127.0.0.1:0", "--lock-dir", str(base / "locks")]
        self.proc = subprocess.Popen(self.acct.enter_argv(argv), stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        wait_for(lambda: self.client(["ps"], check=False) == 0 or self.proc.poll() is not None, "the daemon's start")
        if self.proc.poll() is not None:
            raise SystemExit(f"cli bench: hwagent run exited {self.proc.returncode}; log: {base / 'daemon.log'}")

    def client(self, argv: list[str], check: bool = True) -> int:
        argv = [HWAGENT, *argv[:1], "--root-dir", str(self.root), *argv[1:]]
        rc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.base).returncode
        if check and rc != 0:
            raise SystemExit(f"cli bench: {' '.join(argv)} exited {rc}")
        return rc

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        remove_subtree(self.acct)


# --- Slurm ---------------------------------------------------------------------------

SLURM_CONF = """ClusterName=hwbench
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/slurmctld.pid
SlurmdPidFile={base}/slurmd.pid
SlurmctldLogFile={base}/slurmctld.log
SlurmdLogFile={base}/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
{node} State=UNKNOWN
PartitionName=bench Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""

CGROUP_CONF = """CgroupPlugin=cgroup/v1
ConstrainCores=yes
"""


class Slurm:
    """A single-node Slurm of the bench's own: config under ``base``, its own ports."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.acct = Acct(f"hwagent-bench-slurm-{os.getpid()}")
        self.procs: list[subprocess.Popen] = []
        self.started_munge = False
        for d in ("state", "spool"):
            (base / d).mkdir(parents=True, exist_ok=True)
        host = socket.gethostname().split(".")[0]
        node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
        conf = base / "slurm.conf"
        conf.write_text(SLURM_CONF.format(host=host, base=base, node=node, ctld_port=26817, d_port=26818))
        (base / "cgroup.conf").write_text(CGROUP_CONF)
        self.env = dict(os.environ, SLURM_CONF=str(conf))
        self._munge()
        for argv in (["slurmctld", "-D", "-f", str(conf)], ["slurmd", "-D", "-f", str(conf)]):
            self.procs.append(subprocess.Popen(self.acct.enter_argv(argv), env=self.env, stdin=subprocess.DEVNULL,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda: self._idle_node(host), "slurm's node turning idle")

    def _munge(self) -> None:
        if subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
            return
        Path("/run/munge").mkdir(exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", "munged"], check=True)
        self.started_munge = True
        wait_for(lambda: subprocess.run(["munge", "-n"], capture_output=True).returncode == 0, "munged's start")

    def _idle_node(self, host: str) -> bool:
        out = subprocess.run(["sinfo", "-h", "-n", host, "-o", "%t"], env=self.env, capture_output=True, text=True)
        return out.stdout.strip() in ("idle", "idle*") and not out.stdout.strip().endswith("*")

    def run(self) -> None:
        rc = subprocess.run(["srun", "-n1", "-c1", "--cpu-bind=cores", "true"], env=self.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        if rc != 0:
            raise SystemExit(f"cli bench: srun exited {rc}; logs under {self.base}")

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.started_munge:  # the munged this bench started, by its pid file
            try:
                os.kill(int(Path("/run/munge/munged.pid").read_text()), 15)
            except (OSError, ValueError):
                pass
        self.acct.remove()


def slurm_missing() -> str:
    missing = [t for t in ("srun", "slurmctld", "slurmd", "munged", "sinfo") if shutil.which(t) is None]
    if missing:
        return f"Slurm is absent ({', '.join(missing)} not found: apt-get install slurm-wlm)"
    if os.geteuid() != 0:
        return "Slurm's daemons and cpuacct need root"
    return ""


# --- the run -------------------------------------------------------------------------


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def measure(op: Callable[[], None], acct: Acct | None) -> tuple[float, float, float]:
    """(wall s, client CPU s, server CPU s) of one call of ``op``."""
    c0, s0 = children_cpu(), acct.seconds() if acct else 0.0
    t0 = time.perf_counter()
    op()
    wall = time.perf_counter() - t0
    return wall, children_cpu() - c0, (acct.seconds() - s0) if acct else 0.0


def idle_cpu(acct: Acct, seconds: float = 3.0) -> float:
    s0 = acct.seconds()
    time.sleep(seconds)
    return (acct.seconds() - s0) / seconds


def remove_subtree(acct: Acct) -> None:
    """The bench daemon's runtime subtree in every hierarchy (named after its cpuacct group),
    deepest first, then the cpuacct group itself."""
    for h in Path("/sys/fs/cgroup").iterdir():
        sub = h / acct.path.name
        if h.name != "cpuacct" and sub.is_dir():
            for d in sorted((p for p in sub.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [sub]:
                try:
                    d.rmdir()
                except OSError:
                    pass
    acct.remove()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--setup-slurm", action="store_true", help="write a slurm.conf and start munged, "
                    "slurmctld and slurmd of the bench's own (else the Slurm row is skipped)")
    ap.add_argument("--quick", action="store_true", help="10 rounds")
    args = ap.parse_args()
    rounds = 10 if args.quick else args.rounds
    if os.geteuid() != 0:
        raise SystemExit("cli bench: needs root (the daemon runs workloads; cpuacct cgroups)")
    # the checkout's bytecode written first: under PYTHONDONTWRITEBYTECODE a module edited since its
    # .pyc was written is compiled again by every client started (2 ms for one module), not measured once
    compileall.compile_dir(str(REPO / "agent"), quiet=1)
    base = Path(tempfile.mkdtemp(prefix="hwagent-bench-cli-"))
    hw: Hwagent | None = None
    slurm = None
    why = "not asked for (--setup-slurm)" if not args.setup_slurm else slurm_missing()
    try:
        hw = Hwagent(base / "hwagent")
        if not why:
            slurm = Slurm(base / "slurm")
        ops: dict[str, tuple[Callable[[], None], Acct | None]] = {
            "python -c pass": (lambda: subprocess.run([PY, "-c", "pass"], check=True), None),
            # the floor of the checkout's entry script, which starts the light commands without site
            "python -S -c pass": (lambda: subprocess.run([PY, "-S", "-c", "pass"], check=True), None),
            "hwagent ps": (lambda: hw.client(["ps"]), hw.acct),
            "hwagent launch --wait -- true": (lambda: hw.client(["launch", "--wait", "--rm", "-q", "--cpus", "1",
                                                                 "--", "true"]), hw.acct),
        }
        if slurm is not None:
            ops["srun -n1 -c1 --cpu-bind=cores true"] = (slurm.run, slurm.acct)
        for op, acct in ops.values():  # warm the page cache and both daemons once
            measure(op, acct)
        idle = {"hwagent": idle_cpu(hw.acct)} | ({"slurm": idle_cpu(slurm.acct)} if slurm else {})
        res: dict[str, list[tuple[float, float, float]]] = {k: [] for k in ops}
        for _ in range(rounds):
            for name, (op, acct) in ops.items():
                res[name].append(measure(op, acct))
        report(res, rounds, idle, why)
    finally:
        if slurm is not None:
            slurm.stop()
        if hw is not None:
            hw.stop()
        shutil.rmtree(base, ignore_errors=True)


def report(res: dict[str, list[tuple[float, float, float]]], rounds: int, idle: dict[str, float], why: str) -> None:
    print(f"CLI, {rounds} interleaved rounds; load average {' '.join(open('/proc/loadavg').read().split()[:3])} "
          f"on {os.cpu_count()} CPUs")
    print(f"  {'':34s} {'client CPU':>10s} {'server CPU':>10s} {'total CPU':>10s} {'wall p50':>9s} {'wall p95':>9s}")
    tot = {}
    for name, xs in res.items():
        client = statistics.mean(x[1] for x in xs) * 1e3
        server = statistics.mean(x[2] for x in xs) * 1e3
        walls = [x[0] * 1e3 for x in xs]
        tot[name] = client + server
        print(f"  {name:34s} {client:8.1f}ms {server:8.1f}ms {client + server:8.1f}ms "
              f"{pct(walls, 0.5):7.1f}ms {pct(walls, 0.95):7.1f}ms")
    print("  servers idle: " + ", ".join(f"{k} {v * 1e3:.1f} ms CPU/s" for k, v in idle.items()))
    launch, ps, floor = tot["hwagent launch --wait -- true"], tot["hwagent ps"], tot["python -c pass"]
    srun = tot.get("srun -n1 -c1 --cpu-bind=cores true")
    if srun:
        print(f"  ratio launch/srun, total CPU: {launch / srun:.2f}x (goal <= 1)")
        p50 = {k: pct([x[0] for x in v], 0.5) for k, v in res.items()}
        print(f"  ratio launch/srun, wall p50: {p50['hwagent launch --wait -- true'] / p50['srun -n1 -c1 --cpu-bind=cores true']:.2f}x")
    else:
        print(f"  srun: skipped: {why}")
    print(f"  ratio ps/python -c pass, CPU: {ps / floor:.2f}x (goal <= 3)")


if __name__ == "__main__":
    main()
