"""What naming Slurm's steps costs hwagent per refresh (issue 35 part 2), against the floor.

A fixture tree shaped as slurm 22.05's cgroup/v1 plugin makes it (``slurm_<node>/uid/job/
step/task`` in freezer, cpuset, memory and devices; one thread, this process, in each
task's ``tasks``; ``memory.usage_in_bytes`` and ``cpuset.effective_cpus`` per step) on tmpfs, with N steps. Squeue is
answered from memory (its call is Slurm's cost, once per new job, not per refresh).

- ``refresh``: ``SlurmJobSource.refresh`` (walk, join with the cached answer, readings:
  threads, their schedstat, memory, the step's cpuset) as the component runs it every ``refresh_s``;
- ``walk``: the walk alone;
- ``floor``: the same I/O with bare ``os`` calls and no model: list the node's tree down to
  the tasks, read each step's ``tasks`` files, each thread's ``/proc/<tid>/schedstat`` and
  each step's memory and cpuset files. What any reader of these files must do.

CPU is this process's ``time.process_time()`` per refresh (mean over the rounds), with
``/proc/loadavg``. Run: ``.venv/bin/python bench/slurm_jobs.py [--steps 10 100 1000]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.slurm.jobinfo import JobInfoCache  # noqa: E402
from agent.slurm.readings import StepReader  # noqa: E402
from agent.slurm.source import SlurmJobSource  # noqa: E402

CONTROLLERS = ("freezer", "cpuset", "memory", "devices")


def make_tree(root: Path, steps: int) -> None:
    for ctl in CONTROLLERS:
        for j in range(1, steps + 1):
            task = root / ctl / "slurm_n1" / "uid_1000" / f"job_{j}" / "step_0" / "task_0"
            task.mkdir(parents=True)
            if ctl == "memory":
                (task.parent / "memory.usage_in_bytes").write_text("4096\n")
            if ctl == "cpuset":
                (task.parent / "cpuset.effective_cpus").write_text("0-1\n")
            if ctl == "freezer":
                (task.parent / "tasks").write_text("")
                (task / "tasks").write_text(f"{os.getpid()}\n")


def floor(root: Path) -> int:
    """The same reads, bare: returns the threads read (so nothing is optimised away)."""
    n = 0
    top = root / "freezer" / "slurm_n1"
    for uid in os.scandir(top):
        for job in os.scandir(uid.path):
            for step in os.scandir(job.path):
                tids: list[bytes] = []
                for d in (step.path, *(e.path for e in os.scandir(step.path) if e.is_dir())):
                    with open(os.path.join(d, "tasks"), "rb") as f:
                        tids += f.read().split()
                for tid in tids:
                    with open(f"/proc/{int(tid)}/schedstat", "rb") as f:
                        f.read()
                    n += 1
                rel = os.path.relpath(step.path, root / "freezer")
                with open(root / "memory" / rel / "memory.usage_in_bytes", "rb") as f:
                    f.read()
                with open(root / "cpuset" / rel / "cpuset.effective_cpus", "rb") as f:
                    f.read()
    return n


def cpu_per_call(fn, rounds: int) -> float:
    t0 = time.process_time()
    for _ in range(rounds):
        fn()
    return (time.process_time() - t0) / rounds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    print(f"loadavg before: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    print(f"{'steps':>6} {'refresh ms':>11} {'walk ms':>8} {'floor ms':>9} {'refresh/floor':>14} {'per step us':>12}")
    for n in args.steps:
        root = Path(tempfile.mkdtemp(prefix="hwbench-slurm-", dir="/dev/shm"))
        try:
            make_tree(root, n)
            answer = "".join(f"{j}|1000|alice|batch||\n" for j in range(1, n + 1))
            src = SlurmJobSource("n1", {c: root / c for c in CONTROLLERS}, "",
                                 JobInfoCache("/usr/bin", runner=lambda argv, env, t, a=answer: a),
                                 StepReader(root / "freezer", root / "memory", False))
            src.refresh()  # the first one asks squeue; the timed ones find the answers cached
            refresh = cpu_per_call(src.refresh, args.rounds)
            walk = cpu_per_call(src.walk, args.rounds)
            bare = cpu_per_call(lambda r=root: floor(r), args.rounds)
            print(f"{n:>6} {refresh * 1e3:>11.2f} {walk * 1e3:>8.2f} {bare * 1e3:>9.2f} {refresh / bare:>14.1f} "
                  f"{refresh / n * 1e6:>12.0f}")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(f"loadavg after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
