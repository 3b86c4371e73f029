"""Drain latency: from a device's failing writes to ``sinfo -R`` showing hwagent's reason (issue 35).

A real cluster (Debian's slurm-wlm 22.05: munged, slurmctld, three slurmds each in its own
network and UTS namespace) with one hwagent per node (tests/integration/slurm/agents.py:
each offers its own loop device over a 1 MiB tmpfs, the block probe on, ``[slurm]`` at its
defaults: the drain reads the devices' health every 0.5 s). Each round fails node 2's disk
(``dd`` past the tmpfs's capacity: the kernel's block request errors), then polls
``sinfo -R`` every 20 ms until node 2 shows ``hwagent: ...``; hwagent resumes it once the disk
is quiet for ``recovery_s`` (2 s), and the next round starts after that.

The floor, in the same run, on the same cluster and with the same poller: an administrator's
``scontrol update NodeName=n2 State=DRAIN Reason=...`` run by the bench, timed from the call
to ``sinfo -R`` showing it (the bare round trip hwagent's drain adds its detection to).
Rounds alternate (hwagent, floor, hwagent, ...), so drift in the machine's load falls on both.

CPU time (utime+stime, children included: the scontrol calls are the daemons' children) of
every process involved, over all hwagent rounds and over all floor rounds: the three
hwagent daemons, slurmctld and munged, the three slurmds, and the bench's own children (dd,
sinfo, scontrol). ``/proc/loadavg`` before and after.

Run as root from the repo: ``.venv/bin/python bench/slurm_drain.py [--rounds 5]`` (about a minute).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

NAMES = ["n1", "n2", "n3"]
CLK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.02


def proc_cpu(pid: int) -> float:
    """utime+stime+cutime+cstime of one process (seconds), 0 when gone."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in f[11:15]) / CLK


def own_children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def node_fields() -> str:
    with tempfile.TemporaryDirectory() as d:
        cfg = Path(d) / "empty.toml"
        cfg.write_text("")
        r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--only", "node", "--config", str(cfg)],
                           capture_output=True, text=True, timeout=120, check=True)
    return r.stdout.strip().split(" ", 1)[1]


def reason_of(cluster, node: str) -> str:
    out = cluster.run(["sinfo", "-R", "-h", "-N", "-n", node, "-o", "%E"]).stdout.strip()
    return out


def wait(what: str, check, timeout: float = 60.0) -> float:
    """Poll ``check`` every POLL_S; the monotonic time it first held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(POLL_S)
    raise TimeoutError(f"no {what} within {timeout}s")


class Meter:
    """CPU seconds per group of processes, summed over the intervals it was started and stopped."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups
        self.total = {g: 0.0 for g in [*groups, "bench children"]}
        self.wall = 0.0
        self._t0: dict[str, float] = {}
        self._w0 = 0.0

    def read(self) -> dict[str, float]:
        return {**{g: sum(proc_cpu(p) for p in pids) for g, pids in self.groups.items()},
                "bench children": own_children_cpu()}

    def __enter__(self) -> Meter:
        self._t0, self._w0 = self.read(), time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        now = self.read()
        self.wall += time.monotonic() - self._w0
        for g in self.total:
            self.total[g] += now[g] - self._t0[g]


def main() -> int:
    from tests.integration.slurm.agents import node_agents
    from tests.integration.slurm.cluster import missing_binaries, multi_node_cluster

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if os.geteuid() != 0 or missing_binaries():
        print(f"needs root and {', '.join(missing_binaries()) or 'nothing else'}", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="hwbd-"))
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    lat_hw: list[float] = []
    lat_hw_end: list[float] = []
    lat_floor: list[float] = []
    with multi_node_cluster(base / "slurm", NAMES, node_fields()) as c, \
            node_agents(c, base / "agents", recovery_s=2.0) as agents:
        c.wait_registered()
        groups = {"hwagent x3": [a.proc.pid for a in agents.values()],
                  "slurmctld+munged": [c.procs["slurmctld"].pid, c.procs["munged"].pid],
                  "slurmd x3": [c.procs[f"slurmd.{n}"].pid for n in NAMES]}
        hw, floor = Meter(groups), Meter(groups)
        disk = agents["n2"].disk
        for i in range(args.rounds):
            with hw:
                t0 = time.monotonic()
                disk.fail()
                t_end = time.monotonic()
                shown = wait("hwagent's drain", lambda: reason_of(c, "n2").startswith("hwagent: "))
                lat_hw.append(shown - t0)
                lat_hw_end.append(shown - t_end)
                wait("hwagent's resume", lambda: reason_of(c, "n2") == "")
            with floor:
                t0 = time.monotonic()
                r = c.run(["scontrol", "update", "NodeName=n2", "State=DRAIN", f"Reason=bench floor {i}"])
                assert r.returncode == 0, r.stderr
                shown = wait("the floor's drain", lambda: reason_of(c, "n2").startswith("bench floor"))
                lat_floor.append(shown - t0)
                r = c.run(["scontrol", "update", "NodeName=n2", "State=RESUME"])
                assert r.returncode == 0, r.stderr
                wait("the floor's resume", lambda: reason_of(c, "n2") == "")
        assert "slurm node drained" not in agents["n1"].log() + agents["n3"].log()
    load1 = Path("/proc/loadavg").read_text().split()[:3]

    def ms(xs: list[float]) -> str:
        return f"p50 {statistics.median(xs) * 1000:7.0f} ms   max {max(xs) * 1000:7.0f} ms"

    print(f"drain latency on 3 namespaced nodes, node 2's disk failing; {args.rounds} rounds each, alternating; "
          f"sinfo -R polled every {POLL_S * 1000:.0f} ms; loadavg before {' '.join(load0)}, after {' '.join(load1)}; "
          f"{os.cpu_count()} CPUs")
    print(f"  hwagent: failed writes start -> sinfo -R shows 'hwagent: ...'   {ms(lat_hw)}")
    print(f"  hwagent: failed writes done  -> sinfo -R shows 'hwagent: ...'   {ms(lat_hw_end)}")
    print(f"  floor:   scontrol update DRAIN -> sinfo -R shows the reason    {ms(lat_floor)}")
    print(f"  CPU seconds (utime+stime, children included) over all rounds of each kind: hwagent rounds "
          f"{hw.wall:.1f} s of wall (the resume's wait included), floor rounds {floor.wall:.1f} s; slurmctld's "
          "share is mostly the poller's sinfo calls:")
    for g in hw.total:
        print(f"    {g:<18} hwagent rounds {hw.total[g]:7.2f} s   floor rounds {floor.total[g]:7.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
