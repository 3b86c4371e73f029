"""Workload runtime benchmark: launch and stop latency, p50/p99, against the floor.

launch = from the call (``WorkloadRuntime.run``) to the workload's first
instruction running in its cgroups: the workload is a tiny C program whose
first act is writing CLOCK_MONOTONIC to a file. The runtime path includes
everything a launch does: plan, cgroup creation in every hierarchy (6 v1
controllers + the v2 tree on this hybrid host) with its limits, the shim's
spawn and fork, the child joining its cgroups, exec.

floor = a plain fork+exec from this same process: the child writes its pid
into the same set of cgroup.procs files, prepared beforehand, then execs the
same program (the least any launcher into those cgroups can do).

stop = from the call (``WorkloadRuntime.stop``, grace 10 s; the workload dies on
SIGTERM) to the call's return: the process gone, its cgroups removed, terminal
status reported. floor: SIGTERM + waitpid of the fork+exec'ed process + rmdir
of its prepared cgroups (re-created, untimed, for the next round).

systemd-run --scope is measured only where systemd is PID 1 (it is not on the
development VM).

Run: .venv/bin/python bench/runtime.py [--quick] [--shim c|python]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.cgroups.detect import detect  # noqa: E402
from agent.cgroups.limits import CgroupLimits  # noqa: E402
from agent.cgroups.workload import WorkloadCgroups  # noqa: E402
from agent.cpuset import CPUSet  # noqa: E402
from agent.runtime.config import RuntimeConfig  # noqa: E402
from agent.runtime.runtime import WorkloadRuntime  # noqa: E402
from agent.contracts.pods import AdmittedPod, ContainerAssignment, ContainerSpec, PodSpec, Resources  # noqa: E402

STAMP_C = r"""
#include <stdio.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    FILE *f = fopen(argv[1], "w");
    fprintf(f, "%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    fclose(f);
    if (argc > 2) pause();
    return 0;
}
"""


class NullSink:
    async def pod_status_changed(self, uid, status) -> None:
        pass


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def read_stamp(path: Path, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            text = path.read_text()
            if text.endswith("\n"):
                return int(text)
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no stamp in {path}")
        time.sleep(0.0002)


def pod(i: int, argv: list[str]) -> AdmittedPod:
    uid = uuid.uuid4().hex
    c = ContainerSpec("main", tuple(argv), resources=Resources(cpu_request_milli=500, memory_limit_bytes=256 << 20))
    spec = PodSpec(f"bench{i}", "default", uid, (c,), restart_policy="Never", termination_grace_period_s=10)
    return AdmittedPod(spec, "shared", {"main": ContainerAssignment("main", CPUSet.parse("0"))}, 0.0)


def floor_launch(procs: list[str], argv: list[str]) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            me = f"{os.getpid()}\n".encode()
            for p in procs:
                fd = os.open(p, os.O_WRONLY)
                os.write(fd, me)
                os.close(fd)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    return pid


async def main(n: int, shim: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="hwagent-bench-runtime-"))
    stamp_bin = work / "stamp"
    subprocess.run(["gcc", "-O2", "-o", str(stamp_bin), "-x", "c", "-"], input=STAMP_C.encode(), check=True)
    subtree = f"/hwagent-bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    layout = detect("/sys/fs/cgroup")
    cgroups = WorkloadCgroups(layout, subtree)
    cfg = RuntimeConfig(log_max_bytes=0)
    rt = WorkloadRuntime(cfg, cgroups, work / "root", lambda: NullSink())
    if shim == "python":
        rt.shim = [sys.executable, "-S", str(Path(__file__).resolve().parent.parent / "agent/runtime/shim.py")]
    # the floor's cgroups: the same hierarchies, prepared once
    floor_rel = cgroups.path("floor", "main")
    floor_limits = CgroupLimits(cpus=CPUSet.parse("0"), mems=CPUSet.parse(cgroups.root_mems()))
    floor_dirs = [Path(p).parent for p in cgroups.create(floor_rel, floor_limits)]
    launch_rt, launch_floor, stop_rt, stop_floor, run_return = [], [], [], [], []
    try:
        for i in range(n):
            # runtime launch (workload stays up for the stop measurement)
            s = work / f"rt{i}"
            p = pod(i, [str(stamp_bin), str(s), "wait"])
            t0 = time.monotonic_ns()
            await rt.run(p)
            t1 = time.monotonic_ns()
            launch_rt.append((read_stamp(s) - t0) / 1e6)
            run_return.append((t1 - t0) / 1e6)
            t0 = time.monotonic_ns()
            await rt.stop(p.uid)
            stop_rt.append((time.monotonic_ns() - t0) / 1e6)
            # floor, interleaved so both see the same machine load
            s = work / f"fl{i}"
            floor_procs = cgroups.create(floor_rel, floor_limits)
            t0 = time.monotonic_ns()
            pid = floor_launch(floor_procs, [str(stamp_bin), str(s), "wait"])
            launch_floor.append((read_stamp(s) - t0) / 1e6)
            t0 = time.monotonic_ns()
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
            for d in floor_dirs:
                while True:
                    try:
                        d.rmdir()
                        break
                    except OSError:  # EBUSY for a moment after the exit
                        time.sleep(0.0002)
            stop_floor.append((time.monotonic_ns() - t0) / 1e6)
    finally:
        cgroups.kill(floor_rel)
        cgroups.remove(floor_rel)
        cgroups.remove_pod_dir("floor")
        for h in cgroups.hierarchies:
            try:
                (h.root / subtree.lstrip("/")).rmdir()
            except OSError:
                pass
        shutil.rmtree(work, ignore_errors=True)

    def row(name: str, xs: list[float], floor: list[float] | None) -> str:
        line = f"{name:<34} p50 {pct(xs, .5):8.3f} ms  p99 {pct(xs, .99):8.3f} ms"
        if floor:
            line += f"   ratio p50 {pct(xs, .5) / pct(floor, .5):5.2f}x  p99 {pct(xs, .99) / pct(floor, .99):5.2f}x"
        return line

    print(f"runtime bench: n={n}, shim={rt.shim[0]}, hierarchy={layout.mode} "
          f"({len(cgroups.hierarchies)} cgroup dirs per container), cpus={os.cpu_count()}")
    print(row("launch: runtime (run -> 1st instr)", launch_rt, launch_floor))
    print(row("launch: floor (fork+exec, cgroups)", launch_floor, None))
    print(row("launch: run() returns", run_return, launch_floor))
    print(row("stop: runtime (stop -> all gone)", stop_rt, stop_floor))
    print(row("stop: floor (SIGTERM, waitpid, rmdir)", stop_floor, None))
    print(f"launch mean runtime {statistics.mean(launch_rt):.3f} ms vs floor {statistics.mean(launch_floor):.3f} ms")
    if Path("/proc/1/comm").read_text().strip() == "systemd":
        print("systemd is PID 1: systemd-run --scope comparison not implemented in this run")
    else:
        print("systemd-run --scope: not measured (systemd is not PID 1 here)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shim", choices=("c", "python"), default="c")
    a = ap.parse_args()
    asyncio.run(main(30 if a.quick else 200, a.shim))
