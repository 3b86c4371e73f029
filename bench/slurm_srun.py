"""Slurm job launch with and without hwagent on the nodes (issue 35, "Measured").

A real cluster (Debian's slurm-wlm 22.05: munged, slurmctld, three slurmds each in its own
network and UTS namespace, proctrack/cgroup and task/cgroup in a test-owned subtree; the
tests' harness, tests/integration/slurm/cluster.py) runs ``srun -N1 true`` and
``srun -N3 true`` one at a time, each with one hwagent daemon per node running
(standalone mode, ``[slurm]`` on at its defaults with a preemptible partition configured,
so the jobs, drain and preemption components all run; devices and pressure off) or with
those daemons stopped (SIGSTOP: no CPU, no call to Slurm, no cgroup read: as if absent),
in ABBA order over single runs, so drift in the machine's load falls on both modes alike.

Figures per kind and mode:

- wall: each srun's own wall time (median and p90 over the runs);
- CPU per job: utime+stime of every process involved, charged through cpuacct cgroups of
  the bench's own that each daemon joins after start (what a process forks stays in its
  parent's cpuacct cgroup: Slurm's plugins move jobs in freezer, cpuset, memory and
  devices only): ``slurmctld`` (with munged), ``slurmd`` (the three slurmds' own
  ``/proc/<pid>/stat``), ``slurmstepd`` (the rest of the slurmds' cgroup: the steps'
  slurmstepds and the job's ``true``), ``srun`` (the client), ``hwagent`` (the three daemons);
- hwagent's CPU per job per node next to slurmstepd's (stepd CPU divided by the nodes each
  job ran on);
- the floor is the "without" mode of the same run; ``/proc/loadavg`` before and after.

Run as root from the repo: ``.venv/bin/python bench/slurm_srun.py [--runs 20]`` (about two minutes).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.cli import Acct  # noqa: E402

NAMES = ["n1", "n2", "n3"]
CLK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """utime+stime of one process (seconds), 0 when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK


def node_fields() -> str:
    with tempfile.TemporaryDirectory() as d:
        cfg = Path(d) / "empty.toml"
        cfg.write_text("")
        r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--only", "node", "--config", str(cfg)],
                           capture_output=True, text=True, timeout=120, check=True)
    return r.stdout.strip().split(" ", 1)[1]


class Agents:
    """One hwagent daemon per node, in the ``hwagent`` cpuacct cgroup."""

    def __init__(self, base: Path, cluster, acct: Acct) -> None:
        self.base = base
        self.cluster = cluster
        self.acct = acct
        self.daemons: list = []
        self.subtrees: list[str] = []

    def start(self) -> None:
        from tests.integration.daemon.test_lifecycle import Daemon
        from tests.integration.runtime.test_end_to_end import until

        tag = self.cluster.cgroups.tag
        self.base.mkdir(parents=True, exist_ok=True)
        for n in NAMES:
            sub = f"/hwagent-bench-slurm-{os.getpid()}-{n}"
            self.subtrees.append(sub)
            cfg = self.base / f"{n}.toml"
            cfg.write_text("[pressure]\nenabled = false\n[devices]\nenabled = false\n"
                           f'[runtime]\ncgroup_subtree = "{sub}"\n'
                           f'[slurm]\nenabled = true\nnode_name = "{n}"\nslurm_conf = "{self.cluster.conf}"\n'
                           f'cgroup_parent = "{tag}"\npreemptible_partitions = ["scavenger"]\n')
            d = Daemon(self.base / f"d-{n}-{time.monotonic_ns()}", "--config", str(cfg))
            (self.acct.path / "cgroup.procs").write_text(str(d.proc.pid))
            self.daemons.append(d)
        for d in self.daemons:
            until(lambda d=d: "hwagent ready" in d.log(), "a hwagent to be ready", d)
        time.sleep(2.5)  # one refresh of every daemon before the timed runs

    def stop(self) -> None:
        from tests.cgroup_support import kill_and_remove_subtree

        for d in self.daemons:
            if d.proc.poll() is None:
                d.stop()
            d.cleanup()
        for s in self.subtrees:
            kill_and_remove_subtree(s)
        self.daemons, self.subtrees = [], []


def one_srun(cluster, srun_acct: Acct, nodes: int) -> float:
    t0 = time.monotonic()
    r = subprocess.run(srun_acct.enter_argv(["srun", f"-N{nodes}", "-p", "test", "true"]), env=cluster.env,
                       capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"srun -N{nodes} true failed: {r.stderr.strip()}")
    return wall


def pause(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="sruns per kind and mode")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (cgroups, namespaces, Slurm's daemons)")
    from tests.integration.slurm.cluster import missing_binaries, multi_node_cluster

    if missing_binaries():
        raise SystemExit(f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge")
    fields = node_fields()
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    tag = f"hwbench-slurm-{os.getpid()}"
    accts = {k: Acct(f"{tag}-{k}") for k in ("ctld", "slurmd", "srun", "hwagent")}
    # kind -> mode -> lists
    walls: dict[tuple[int, str], list[float]] = {}
    cpu: dict[tuple[int, str], dict[str, float]] = {}
    jobs: dict[tuple[int, str], int] = {}
    base = Path(tempfile.mkdtemp(prefix="hwb-", dir="/tmp"))
    try:
        with ExitStack() as stack:
            c = stack.enter_context(multi_node_cluster(base / "slurm", NAMES, fields, cgroups=True))
            # a preemptible partition for the hwagents' preemption component (no job uses it here)
            c.run(["scontrol", "create", "PartitionName=scavenger", "Nodes=ALL", "State=UP"])
            c.wait_registered()
            for name, p in c.procs.items():
                acct = accts["ctld"] if name in ("munged", "slurmctld") else accts["slurmd"]
                (acct.path / "cgroup.procs").write_text(str(p.pid))
            slurmd_pids = [p.pid for name, p in c.procs.items() if name.startswith("slurmd.")]
            agents = Agents(base / "hw", c, accts["hwagent"])
            stack.callback(agents.stop)
            agents.start()
            hw_pids = [d.proc.pid for d in agents.daemons]
            for _ in range(3):  # warm-up: the first launches load plugins and fill caches
                one_srun(c, accts["srun"], 3)
            # ABBA over single runs: "without" has every hwagent stopped (SIGSTOP: no CPU, no calls
            # to Slurm, no cgroup reads), "with" has them running; drift in the machine's load falls
            # on both modes alike
            order = ("without", "with", "with", "without")
            for i in range(args.runs * 2):
                for nodes in (1, 3):
                    mode = order[i % 4]
                    key = (nodes, mode)
                    pause(hw_pids, signal.SIGSTOP if mode == "without" else signal.SIGCONT)
                    time.sleep(0.2)
                    before = {k: a.seconds() for k, a in accts.items()}
                    sd0 = sum(proc_cpu(p) for p in slurmd_pids)
                    walls.setdefault(key, []).append(one_srun(c, accts["srun"], nodes))
                    time.sleep(0.3)  # the steps' stepd exits are charged before the reading
                    sd1 = sum(proc_cpu(p) for p in slurmd_pids)
                    got = {k: a.seconds() - before[k] for k, a in accts.items()}
                    acc = cpu.setdefault(key, {})
                    acc["slurmctld"] = acc.get("slurmctld", 0) + got["ctld"]
                    acc["slurmd"] = acc.get("slurmd", 0) + (sd1 - sd0)
                    acc["slurmstepd"] = acc.get("slurmstepd", 0) + got["slurmd"] - (sd1 - sd0)
                    acc["srun"] = acc.get("srun", 0) + got["srun"]
                    acc["hwagent"] = acc.get("hwagent", 0) + got["hwagent"]
                    jobs[key] = jobs.get(key, 0) + 1
            pause(hw_pids, signal.SIGCONT)
    finally:
        for a in accts.values():
            a.remove()
        subprocess.run(["rm", "-rf", str(base)], check=False)
    load1 = Path("/proc/loadavg").read_text().split()[:3]

    print(f"srun with and without hwagent on 3 nodes; {args.runs} runs per kind and mode, ABBA-interleaved; "
          f"loadavg before {' '.join(load0)}, after {' '.join(load1)}; {os.cpu_count()} CPUs")
    print(f"{'kind':<10} {'mode':<8} {'wall p50':>9} {'wall p90':>9} {'ratio':>6}  CPU ms per job: "
          f"{'ctld':>6} {'slurmd':>6} {'stepd':>6} {'srun':>6} {'hwagent':>7} {'total':>6} {'ratio':>6}")
    for nodes in (1, 3):
        base_w = statistics.median(walls[(nodes, "without")])
        base_c = sum(cpu[(nodes, "without")].values()) / jobs[(nodes, "without")]
        for mode in ("without", "with"):
            key = (nodes, mode)
            w = sorted(walls[key])
            per = {k: v / jobs[key] * 1000 for k, v in cpu[key].items()}
            total = sum(per.values())
            print(f"srun -N{nodes:<3} {mode:<8} {statistics.median(w) * 1000:>7.0f}ms {w[int(len(w) * 0.9) - 1] * 1000:>7.0f}ms "
                  f"{statistics.median(w) / base_w:>6.2f}  {'':>14}{per['slurmctld']:>6.1f} {per['slurmd']:>6.1f} "
                  f"{per['slurmstepd']:>6.1f} {per['srun']:>6.1f} {per['hwagent']:>7.1f} {total:>6.1f} "
                  f"{total / (base_c * 1000):>6.2f}")
        key = (nodes, "with")
        hw_node = cpu[key]["hwagent"] / jobs[key] / len(NAMES) * 1000
        stepd_node = cpu[key]["slurmstepd"] / jobs[key] / nodes * 1000
        print(f"  -N{nodes}: hwagent {hw_node:.2f} ms CPU per job per node (each of 3 daemons, whether the job ran "
              f"there or not) vs slurmstepd {stepd_node:.2f} ms per job per node it ran on")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
