"""Cost and reaction time of the pressure probes, each against a peer in the same run.

1. Overhead: `perf bench sched pipe` (a scheduler ping-pong, the worst case for
   the run-queue probe) with no probe attached vs each probe attached, rounds
   interleaved; slowdown = ratio of wall usecs/op (median and min) and of CPU
   time per op (median; the steady figure on a shared machine). Then the
   in-kernel ns per event of each program from kernel.bpf_stats_enabled.
2. BPF build: BTF offsets, compile+load (one compile for all probes, in a child), attach.
3. RSS: a bare interpreter (the floor, started in the same run), this process with
   every probe loaded, and the same compile done in-process with bcc (how the
   daemon did it before the build moved to a child).
4. Onset of CPU pressure -> eviction decision: real hogs in a test cgroup, with
   the BPF reader and with the schedstat fallback side by side.
5. Device error -> Unhealthy: ENOSPC on a loop device over a full tmpfs.
6. (--daemon-rss) RSS of `hwagent run` with every component once its probes are
   attached, of `hwagent run` with [pressure] off, and of a bare interpreter
   that only sends READY (the floor), started side by side in the same run.

Run as root: `.venv/bin/python bench/probes.py [--rounds 5] [--loops 20000] [--daemon-rss]`
(`--daemon-rss` alone skips 1-5).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402

from agent.cgroups.hierarchy import detect_hierarchy  # noqa: E402
from agent.cpuset import CPUSet  # noqa: E402
from agent.pressure.bpfsys import fd_info  # noqa: E402
from agent.pressure.config import PressureConfig  # noqa: E402
from tests.integration.pressure.test_eviction import FakePolicy as Policy, Rec  # noqa: E402  (the eviction tests' fakes)


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def pipe_run(loops: int) -> tuple[float, float]:
    """(wall usecs/op, CPU usecs/op) of one pinned `perf bench sched pipe` run.

    Pinned to one CPU: unpinned, the pair lands on one or two CPUs by chance and
    usecs/op is bimodal (about 3.5 vs 9 on the CI VM), which drowns the probe cost.
    The CPU time (user + system of perf and the two tasks it forks and waits for)
    includes the tracepoints and BPF programs, which run in the switching task's
    context, but not the time spent waiting for a CPU that other load holds, so
    on a shared machine it is the steadier of the two.
    """
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(["taskset", "-c", "0", "perf", "bench", "sched", "pipe", "-l", str(loops)],
                         capture_output=True, text=True, check=True).stdout
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return float(re.search(r"([\d.]+) usecs/op", out).group(1)), cpu * 1e6 / loops


def pipe_usecs(loops: int) -> float:
    return pipe_run(loops)[0]


def prog_stats(bpf) -> dict[str, tuple[int, int]]:
    """(run_cnt, run_time_ns) per loaded BPF program, from its fd's fdinfo; the
    kernel fills them only while kernel.bpf_stats_enabled=1."""
    out = {}
    for name, fd in bpf.programs.items():
        info = fd_info(fd)
        out[name] = (int(info.get("run_cnt", 0)), int(info.get("run_time_ns", 0)))
    return out


_RSS_SNIPPET = "import psutil; print(psutil.Process().memory_info().rss)"
_INPROC_SNIPPET = """
import json, sys, psutil
from bcc import BPF
from agent.pressure.bpfbuild import _compile
req = json.loads(sys.stdin.read())
bpf = _compile(BPF, req["header"], list(req["units"].values()), req["cflags"])
print(psutil.Process().memory_info().rss)
"""


def child_rss_mb(snippet: str, stdin: str = "") -> float:
    """RSS of a fresh interpreter at the end of ``snippet`` (which prints it)."""
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", snippet], input=stdin, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": root}).stdout
    return int(out.strip().splitlines()[-1]) / 2**20


def in_kernel_cost(ps, loops: int) -> list[tuple[str, int, float]]:
    """Every probe attached, bpf_stats on: for each program, the events it ran on
    during one pipe run and its mean in-BPF ns per event."""
    stats_path = Path("/proc/sys/kernel/bpf_stats_enabled")
    old = stats_path.read_text().strip()
    stats_path.write_text("1")
    try:
        before = prog_stats(ps.bpf)
        pipe_usecs(loops)
        after = prog_stats(ps.bpf)
    finally:
        stats_path.write_text(old)
    rows = []
    for name, (c1, t1) in after.items():
        c0, t0 = before.get(name, (0, 0))
        if c1 > c0:
            rows.append((name, c1 - c0, (t1 - t0) / (c1 - c0)))
    return sorted(rows, key=lambda r: -r[1] * r[2])


def onset_to_decision(probes, hierarchy, fallback: bool) -> float | None:
    from agent.pressure.engine import PressureEngine
    from agent.pressure.readers import SchedstatRunqueue

    name = f"hwagent-bench-{os.getpid()}-{'fb' if fallback else 'bpf'}"
    d = hierarchy.mount / name / "ctr"
    d.mkdir(parents=True)
    procs = []
    try:
        ncpu = os.cpu_count()
        rec = Rec("uid", "bench", "hog", "ctr", "reclaimed_cores", CPUSet.parse(f"0-{ncpu - 1}"), f"/{name}/ctr")
        cfg = PressureConfig(interval_s=0.25, window_s=1.0, met_fraction=0.75, soft_threshold=0.3,
                             hard_threshold=0.6, health_enabled=False)
        eng = PressureEngine(cfg, cpu=Policy([rec]), probes=probes, mode="standalone")
        eng.load()
        if fallback:
            eng.runqueue = SchedstatRunqueue(hierarchy.mount)
        eng.tick()
        for _ in range(2 * ncpu + 1):
            procs.append(subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"],
                                          preexec_fn=lambda: (d / "cgroup.procs").write_text("0")))
        onset = time.monotonic()
        while time.monotonic() - onset < 30:
            time.sleep(cfg.interval_s)
            if eng.tick().evictions:
                return time.monotonic() - onset
        return None
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
        for x in (d, d.parent):
            for _ in range(50):
                try:
                    x.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def error_to_unhealthy(probes) -> float | None:
    from agent.pressure.engine import PressureEngine

    class Board:
        down = None

        def set_health_for(self, kind, key, healthy, reason, source):
            if not healthy and self.down is None:
                self.down = time.monotonic()
            return []

    board = Board()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", tmp], check=True)
        dev = None
        try:
            subprocess.run(["truncate", "-s", "8M", f"{tmp}/img"], check=True)
            dev = subprocess.run(["losetup", "-f", "--show", f"{tmp}/img"], capture_output=True, text=True,
                                 check=True).stdout.strip()
            eng = PressureEngine(PressureConfig(interval_s=0.1, eviction_enabled=False), device_health=board,
                                 probes=probes)
            eng.load()
            eng.tick()
            t0 = time.monotonic()
            dd = subprocess.Popen(["dd", "if=/dev/zero", f"of={dev}", "bs=64k", "count=64", "oflag=direct"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while time.monotonic() - t0 < 10 and board.down is None:
                time.sleep(0.1)
                eng.tick()
            dd.wait()
            return None if board.down is None else board.down - t0
        finally:
            if dev:
                subprocess.run(["losetup", "-d", dev], check=False)
            subprocess.run(["umount", "-l", tmp], check=False)


def _bpf_programs(pid: int) -> int:
    """How many BPF program fds a process holds (what the probes have attached)."""
    n = 0
    for fd in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            if "prog_type:" in fd.read_text():
                n += 1
        except OSError:
            pass
    return n


def daemon_rss_mb(cmd: list[str], wait_programs: int, timeout_s: float = 300.0) -> tuple[float, int]:
    """Start ``cmd`` with a notify socket, wait for READY=1 and for its BPF programs, return (RSS MB, programs)."""
    d = Path(tempfile.mkdtemp(prefix="hwb-", dir="/tmp"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(d / "notify"))
    sock.settimeout(timeout_s)
    cfg = d / "no-pressure.toml"
    cfg.write_text("[pressure]\nenabled = false\n")
    full = [c.replace("{root}", str(d / "root")).replace("{no_pressure}", str(cfg)) for c in cmd]
    env = dict(os.environ, NOTIFY_SOCKET=str(d / "notify"), PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    proc = subprocess.Popen(full, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while b"READY=1" not in sock.recv(65536):
            pass
        deadline = time.monotonic() + timeout_s
        progs = _bpf_programs(proc.pid)
        while progs < wait_programs and time.monotonic() < deadline:
            time.sleep(0.2)
            progs = _bpf_programs(proc.pid)
        time.sleep(1.0)  # the first ticks after load allocate their readings
        return psutil.Process(proc.pid).memory_info().rss / 2**20, _bpf_programs(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        sock.close()
        subprocess.run(["rm", "-rf", str(d)], check=False)


def bench_daemon_rss() -> None:
    py = sys.executable
    floor = [py, "-c", "import os, signal, socket; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM});"
             "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b'READY=1', os.environ['NOTIFY_SOCKET']);"
             "signal.sigwait({signal.SIGTERM})"]
    run = ["run", "--root-dir", "{root}", "--metrics-address", "127.0.0.1:0", "--mode", "standalone"]
    hwagent = str(Path(py).parent / "hwagent")
    f, _ = daemon_rss_mb(floor, 0)
    off, _ = daemon_rss_mb([hwagent, *run, "--config", "{no_pressure}"], 0)
    # every program of every probe this kernel has; 9 here (runqlat 1, blockio 3, netdev 2, iommu, thermal,
    # irq) -- waiting for at least the run-queue probe's one is enough to know the build is done
    on, progs = daemon_rss_mb([hwagent, *run], 1)
    print("\n# daemon RSS (same run)")
    print(f"floor: python that sends READY itself   {f:7.1f} MB")
    print(f"hwagent run, [pressure] off               {off:7.1f} MB  ({off / f:.2f}x floor)")
    print(f"hwagent run, every component, probes on   {on:7.1f} MB  ({on / f:.2f}x floor; "
          f"{progs} BPF programs held; the probes add {on - off:.1f} MB)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", type=int, default=20000)
    ap.add_argument("--daemon-rss", action="store_true", help="only the daemon RSS comparison")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/probes.py needs root (BPF, cgroups, loop devices)", file=sys.stderr)
        return 2
    if args.daemon_rss:
        bench_daemon_rss()
        return 0

    rss_floor = child_rss_mb(_RSS_SNIPPET)
    rss0 = rss_mb()
    from agent.pressure.probes import PROBES, ProbeSet

    hierarchy = detect_hierarchy()
    ps = ProbeSet(list(PROBES), hierarchy=hierarchy.name)
    t = time.perf_counter()
    ps.load()
    load_s = time.perf_counter() - t
    rss_loaded = rss_mb()
    for n in PROBES:
        ps.detach(n)
    t = time.perf_counter()
    ps.attach("runqlat")
    attach_ms = (time.perf_counter() - t) * 1e3
    ps.detach("runqlat")

    configs = ["none", "runqlat", "blockio", "netdev", "irq", "all"]
    results: dict[str, list[float]] = {c: [] for c in configs}
    cpu: dict[str, list[float]] = {c: [] for c in configs}
    pipe_usecs(args.loops)  # warm-up: the first run pays for page faults and cold caches
    for r in range(args.rounds):
        # interleaved, and rotated each round, so load drift and position effects hit every config alike
        for c in configs[r % len(configs):] + configs[: r % len(configs)]:
            names = list(PROBES) if c == "all" else ([] if c == "none" else [c])
            for n in names:
                ps.attach(n)
            try:
                wall, used = pipe_run(args.loops)
                results[c].append(wall)
                cpu[c].append(used)
            finally:
                for n in names:
                    ps.detach(n)
    base, base_min, base_cpu = statistics.median(results["none"]), min(results["none"]), statistics.median(cpu["none"])
    print(f"# taskset -c 0 perf bench sched pipe -l {args.loops}, {args.rounds} interleaved rounds "
          f"({os.cpu_count()} CPUs, hierarchy {hierarchy.name}); usecs/op wall (median, min) and CPU time per op "
          f"(median): on a shared machine the wall figures carry the other load, CPU time much less")
    print(f"{'probe':<10} {'wall med':>9} {'vs none':>8} {'wall min':>9} {'vs none':>8} {'cpu med':>9} {'vs none':>8}")
    for c in configs:
        m, lo, u = statistics.median(results[c]), min(results[c]), statistics.median(cpu[c])
        print(f"{c:<10} {m:>9.3f} {m / base:>7.3f}x {lo:>9.3f} {lo / base_min:>7.3f}x {u:>9.3f} {u / base_cpu:>7.3f}x")

    for n in PROBES:
        ps.attach(n)
    t0 = time.perf_counter()
    usecs = pipe_usecs(args.loops)
    wall_ns = (time.perf_counter() - t0) * 1e9
    rows = in_kernel_cost(ps, args.loops)
    for n in PROBES:
        ps.detach(n)
    total_ns = sum(cnt * ns for _name, cnt, ns in rows)
    print(f"\n# in-kernel cost (kernel.bpf_stats_enabled), all probes, one pipe run of {args.loops} loops")
    print(f"{'program':<22} {'events':>9} {'ns/event':>9}")
    for name, cnt, ns in rows:
        print(f"{name:<22} {cnt:>9} {ns:>9.0f}")
    print(f"time in BPF programs: {total_ns / 1e6:.1f} ms of a {wall_ns / 1e6:.1f} ms run "
          f"({total_ns / wall_ns:.1%} of one CPU; {total_ns / 1e3 / args.loops:.2f} us per pipe op "
          f"against {usecs:.2f} us/op)")

    rss_inproc = child_rss_mb(_INPROC_SNIPPET, json.dumps(ps.last_request))
    print("\n# build and memory")
    print(f"BTF offsets          {ps.btf_s * 1e3:8.1f} ms")
    print(f"compile+load (all 6) {ps.compile_s * 1e3:8.1f} ms in the child, child total {ps.child_s * 1e3:.1f} ms "
          f"(ProbeSet.load total {load_s * 1e3:.1f} ms)")
    print(f"attach runqlat       {attach_ms:8.2f} ms")
    print(f"RSS: bare interpreter (floor, same run) {rss_floor:.1f} MB; this process before load {rss0:.1f} MB, "
          f"with every probe loaded {rss_loaded:.1f} MB ({rss_loaded / rss_floor:.2f}x floor); "
          f"the same compile in-process with bcc {rss_inproc:.1f} MB ({rss_inproc / rss_floor:.2f}x floor)")

    for n in PROBES:
        ps.attach(n)
    print("\n# reaction time")
    bpf = onset_to_decision(ps, hierarchy, fallback=False)
    fb = onset_to_decision(ps, hierarchy, fallback=True)
    fmt = lambda v: "none in 30 s" if v is None else f"{v:.2f} s"  # noqa: E731
    ratio = f"{fb / bpf:.2f}x" if bpf and fb else "n/a"
    print(f"onset -> eviction decision: bpf {fmt(bpf)}, schedstat fallback {fmt(fb)} (fallback/bpf {ratio}); "
          f"Katalyst load eviction: >= 240 s by design (1-min load average + sample ring)")
    err = error_to_unhealthy(ps)
    print(f"device error -> Unhealthy: bpf {fmt(err)}; diskstats fallback: never (no error counts)")
    ps.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
