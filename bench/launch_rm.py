"""launch+rm bench (issue 32 item 6): after N ``hwagent launch --wait --rm -q -- true`` rounds,
are the disk used under the root dir and the daemon's RSS back where they started?

One daemon of the bench's own (standalone, its own root dir, in a cpuacct cgroup of the
bench's own, with the pods' cgroups under it, as bench/cli.py does). After a warm-up of
``--warmup`` rounds (the first jobs load code and fill caches the daemon keeps) it takes
the baseline: the daemon's RSS (VmRSS), the bytes under ``<root>`` (``du -s --block-size=1``)
and the directories under ``<root>/logs``; then N rounds, as root or as ``--user`` (a member
of ``--group``, the daemon's socket group: the launch runs with that uid and its groups),
with the same three figures at every tenth of the run, and at the end the delta against
the baseline. The tolerance is what the RSS moved between checkpoints (its max - min over
the run's checkpoints): a figure within it is back where it started.

CPU time is utime + stime of every process involved: the clients' from
``getrusage(RUSAGE_CHILDREN)``, the daemon's and the jobs' from cpuacct. The floor, measured
in the same run, interleaved every tenth round: ``python -S -c pass`` with the same
interpreter (the cost of starting any client at all) and the daemon's CPU while idle
(over ``--idle`` seconds before the rounds). The load average is printed at the start and
the end: the machine is shared, and a loaded one inflates every wall time.

Run: scripts/dev bench launch_rm [--rounds 1000] [--user NAME --group GROUP]
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.cli import Acct, children_cpu, remove_subtree, wait_for  # noqa: E402

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
[workloads]
socket_group = "{group}"
"""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit(f"launch_rm bench: no VmRSS for pid {pid}")


def du_bytes(path: Path) -> int:
    out = subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def du_by_dir(root: Path) -> dict[str, int]:
    """Bytes per entry of ``root`` (what moved, when the total did)."""
    return {e.name: du_bytes(Path(e.path)) for e in os.scandir(root)}


def log_dirs(root: Path) -> int:
    logs = root / "logs"
    return sum(1 for e in os.scandir(logs) if e.is_dir(follow_symlinks=False)) if logs.is_dir() else 0


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Daemon:
    def __init__(self, base: Path, group: str) -> None:
        self.base = base
        self.acct = Acct(f"hwagent-bench-launchrm-{os.getpid()}")
        cfg = base / "hw.toml"
        cfg.write_text(DAEMON_CONFIG.format(subtree="/" + self.acct.path.name, group=group))
        self.root = base / "root"
        self.log = open(base / "daemon.log", "wb")  # noqa: SIM115 - closed in stop()
        argv = [HWAGENT, "run", "--config", str(cfg), "--root-dir", str(self.root), "--mode", "standalone",
                "--metrics-address", "127.0.0.1:0", "--lock-dir", str(base / "locks")]
        self.proc = subprocess.Popen(self.acct.enter_argv(argv), stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        wait_for(lambda: self.proc.poll() is not None or (self.root / "cli.sock").exists() and subprocess.run(
            [HWAGENT, "ps", "--root-dir", str(self.root)], capture_output=True).returncode == 0, "the daemon's start")
        if self.proc.poll() is not None:
            raise SystemExit(f"launch_rm bench: hwagent run exited {self.proc.returncode}; log: {base / 'daemon.log'}")

    @property
    def pid(self) -> int:
        """The daemon itself (the shell that entered the cgroup exec'd it)."""
        return self.proc.pid

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        remove_subtree(self.acct)


class Client:
    """``hwagent launch --wait --rm -q -- true`` as root or as a user (its uid, gid, groups)."""

    def __init__(self, root: Path, cwd: Path, user: str | None) -> None:
        self.argv = [HWAGENT, "launch", "--root-dir", str(root), "--wait", "--rm", "-q", "--", "true"]
        self.cwd = cwd
        self.kw: dict = {}
        if user is not None:
            pw = pwd.getpwnam(user)
            self.kw = {"user": pw.pw_uid, "group": pw.pw_gid,
                       "extra_groups": os.getgrouplist(user, pw.pw_gid),
                       "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": pw.pw_dir, "USER": user}}

    def launch(self) -> float:
        t0 = time.perf_counter()
        r = subprocess.run(self.argv, cwd=self.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **self.kw)
        if r.returncode != 0:
            raise SystemExit(f"launch_rm bench: launch exited {r.returncode}: {r.stderr.decode().strip()}")
        return time.perf_counter() - t0


def floor_round() -> tuple[float, float]:
    """``python -S -c pass``: (wall s, CPU s)."""
    c0, t0 = children_cpu(), time.perf_counter()
    subprocess.run([PY, "-S", "-c", "pass"], check=True)
    return time.perf_counter() - t0, children_cpu() - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of the daemon's idle CPU, measured before")
    ap.add_argument("--user", help="launch as this user (a member of --group); default root")
    ap.add_argument("--group", default="hwagent", help="the daemon's socket group (default hwagent)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("launch_rm bench: needs root (a daemon, cgroups)")
    if args.user is not None:
        try:
            members = grp.getgrnam(args.group).gr_mem
        except KeyError:
            raise SystemExit(f"launch_rm bench: no group {args.group}") from None
        if args.user not in members:
            raise SystemExit(f"launch_rm bench: {args.user} is not in group {args.group}")
    base = Path(tempfile.mkdtemp(prefix="hwbench-launchrm-"))
    os.chmod(base, 0o755)  # a user reaches <root>/cli.sock through it
    cwd = base / "cwd"
    cwd.mkdir()
    os.chmod(cwd, 0o777)
    load0 = loadavg()
    d = Daemon(base, args.group)
    try:
        client = Client(d.root, cwd, args.user)
        for _ in range(args.warmup):
            client.launch()
        cpu0 = d.acct.seconds()
        time.sleep(args.idle)
        idle_cpu_s = (d.acct.seconds() - cpu0) / args.idle
        rss0, du0, dirs0 = rss_kib(d.pid), du_bytes(d.root), log_dirs(d.root)
        by0 = du_by_dir(d.root)
        marks = [(0, rss0, du0, dirs0)]
        walls: list[float] = []
        floors: list[tuple[float, float]] = []
        step = max(1, args.rounds // 10)
        c_cli0, c_d0, t0 = children_cpu(), d.acct.seconds(), time.perf_counter()
        floor_cpu = 0.0
        for i in range(1, args.rounds + 1):
            walls.append(client.launch())
            if i % step == 0:
                f = floor_round()
                floors.append(f)
                floor_cpu += f[1]
                marks.append((i, rss_kib(d.pid), du_bytes(d.root), log_dirs(d.root)))
        wall = time.perf_counter() - t0
        cli_cpu = children_cpu() - c_cli0 - floor_cpu  # the floor rounds' own CPU taken out
        daemon_cpu = d.acct.seconds() - c_d0
        rss1, du1, dirs1 = rss_kib(d.pid), du_bytes(d.root), log_dirs(d.root)
        by1 = du_by_dir(d.root)
        load1 = loadavg()
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)

    n = args.rounds
    who = args.user or "root"
    rss_marks = [m[1] for m in marks]
    print(f"launch_rm bench: {n} rounds of `hwagent launch --wait --rm -q -- true` as {who} "
          f"(after {args.warmup} warm-up rounds)")
    print(f"  loadavg start {load0}, end {load1}; {os.cpu_count()} CPUs")
    print(f"  wall {wall:.1f} s; per round median {statistics.median(walls) * 1e3:.1f} ms, "
          f"p90 {sorted(walls)[int(0.9 * (len(walls) - 1))] * 1e3:.1f} ms")
    print(f"  CPU (utime+stime) per round: clients {cli_cpu / n * 1e3:.1f} ms, daemon+jobs "
          f"{daemon_cpu / n * 1e3:.1f} ms, total {(cli_cpu + daemon_cpu) / n * 1e3:.1f} ms")
    if floors:
        print(f"  floor (same run): `python -S -c pass` wall median {statistics.median(f[0] for f in floors) * 1e3:.1f}"
              f" ms, CPU {statistics.mean(f[1] for f in floors) * 1e3:.1f} ms; daemon idle "
              f"{idle_cpu_s * 1e3:.1f} ms CPU per s (x wall {wall:.0f} s = {idle_cpu_s * wall:.1f} s of the "
              f"daemon's {daemon_cpu:.1f} s)")
    print("  checkpoints (round: daemon RSS KiB, du <root> bytes, dirs under logs/):")
    for i, rss, du, dirs in marks:
        print(f"    {i:6d}: {rss:8d} KiB  {du:10d} B  {dirs:5d}")
    tol = max(rss_marks) - min(rss_marks)
    half = marks[len(marks) // 2]
    if half[0] and n > half[0]:
        print(f"  RSS trend: first {half[0]} rounds {(half[1] - rss0) / half[0]:+.2f} KiB/round, last "
              f"{n - half[0]} rounds {(rss1 - half[1]) / (n - half[0]):+.2f} KiB/round (a leak keeps its slope; "
              f"caches that fill flatten)")
    print(f"  RSS  before {rss0} KiB, after {rss1} KiB, delta {rss1 - rss0:+d} KiB "
          f"(tolerance measured: checkpoints span {tol} KiB, {tol / max(rss0, 1) * 100:.1f}% of before)")
    print(f"  disk before {du0} B, after {du1} B, delta {du1 - du0:+d} B; "
          f"dirs under logs/ before {dirs0}, after {dirs1}, delta {dirs1 - dirs0:+d}")
    moved = {k: by1.get(k, 0) - by0.get(k, 0) for k in sorted(set(by0) | set(by1))}
    print("  disk delta per entry of <root>: " + ", ".join(f"{k} {v:+d} B" for k, v in moved.items() if v)
          + " (cpu/: the CPU policy's write-ahead journal, compacted when it passes 4 MiB, agent/journal.py)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
