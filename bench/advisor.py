"""The advisor side by side (issue 26): a latency-sensitive shared pod beside reclaimed CPU hogs.

One run, three configurations taken in turn ``--rounds`` times (the node's own load drifts
over minutes: taken in turn, each configuration sees the same drift), each on a fresh real daemon (``hwagent run``, standalone,
the runtime launching real pods in a bench-owned cgroup subtree, the run-queue probe on):

- ``floor``: the LS pod alone (no hogs): the wake-up lateness this machine gives anyway (the
  advisor on, to record its own signal, the LS pod's run-queue delay p99, with nothing to
  suppress: the calibration of ``target_us``, docs/advisor.md);
- ``off``: the LS pod beside ``--hogs`` reclaimed hogs, ``[advisor]`` off (static pools,
  pressure evicts on its own thresholds: today's behaviour);
- ``on``: the same with ``[advisor] enabled = true``.
- ``off-nested``, ``on-nested`` (``--configs``): the same with the hogs in the runtime subtree
  beside the LS pod (``[cgroups] runtime_reclaimed_subtree = ""``), the layout before the
  reclaimed pods got their own idle subtree (issue 26, round 3).

The LS workload is a periodic timer loop (a shared pod, 100m): it sleeps to the next
``PERIOD_MS`` deadline and records how late it woke (its own wake-up lateness). The hogs
are ``while :; do :; done`` reclaimed pods. Printed per configuration, over the measured
window (after ``--settle`` s): LS lateness p50/p99 (µs), the hogs' CPU seconds (their pod
cgroups' cpuacct), the CPU the LS pod used, the share of the CPU the LS leaves idle that
the hogs got (and, the node being shared, their share of what they got plus what nobody ran on:
``/proc/stat`` idle), evictions, the advisor's pool/quota changes per minute, the CPU time of
every process involved (daemon utime+stime from /proc, pods from their cgroups) and the
load average at the end. ``[cpu] transition_period_s`` is 3 s here so that the LS pod
joins its pool before the window starts (the default 30 s ramp-up would be half the run).

Goals: LS p99 with the advisor <= 2x the floor; hogs >= 70 % of the CPU the LS leaves idle;
0 evictions; bounded changes per minute.

Run (root): .venv/bin/python bench/advisor.py [--rounds 2] [--window 15] [--settle 6] [--hogs 3] [--target US]
"""

from __future__ import annotations

import argparse
import json
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

from agent.cgroups.config import derived_reclaimed_subtree  # noqa: E402
from tests.cgroup_support import kill_and_remove_subtree  # noqa: E402

PY = sys.executable
HWAGENT = str(Path(PY).parent / "hwagent")
REPO = Path(__file__).resolve().parent.parent
PERIOD_MS = 5
#: seconds a CLI call may take (raised with --start-timeout: a TCG guest is slow)
CLI_TIMEOUT = [120.0]
HOG = "while :; do :; done"
#: the LS loop: sleep to each deadline, append the lateness (µs) to the file given
LS = f"""
import sys, time
out = open(sys.argv[1], "a", buffering=1)
period = {PERIOD_MS} / 1000
nxt = time.monotonic() + period
while True:
    d = nxt - time.monotonic()
    if d > 0:
        time.sleep(d)
    late = time.monotonic() - nxt
    out.write(f"{{time.time():.4f}} {{late * 1e6:.1f}}\\n")
    nxt += period
    if late > period:
        nxt = time.monotonic() + period
"""


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([HWAGENT, args[0], "--root-dir", str(root), *args[1:]], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT[0])


def wait_for(cond, what: str, timeout: float = 120.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def pods(root: Path) -> dict[str, dict]:
    r = cli(root, "ps", "--format", "json")
    return {p["name"]: p for p in json.loads(r.stdout)["pods"]} if r.returncode == 0 else {}


def usage_s(subtree: str, uid: str) -> float:
    """A pod cgroup's CPU seconds: cpuacct on v1 (hybrid), cpu.stat usage_usec on v2 (the guest)."""
    rel = Path(subtree.lstrip("/")) / f"pod{uid}"
    try:
        return int((Path("/sys/fs/cgroup/cpuacct") / rel / "cpuacct.usage").read_text()) / 1e9
    except OSError:
        pass
    try:
        for line in (Path("/sys/fs/cgroup") / rel / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return 0.0


def proc_cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def idle_s() -> float:
    """The node's idle + iowait CPU seconds so far (/proc/stat): what nobody ran on."""
    f = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return (int(f[4]) + int(f[5])) / os.sysconf("SC_CLK_TCK")


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def one(config: str, args: argparse.Namespace, tmp: Path) -> dict:
    """One configuration: ``floor``, ``off`` or ``on``; ``-nested`` after it puts the hogs in the
    runtime subtree beside the LS pod (``runtime_reclaimed_subtree = ""``, the layout before
    issue 26's round 3) instead of the reclaimed subtree."""
    subtree = f"/hwagent-bench-{uuid.uuid4().hex[:6]}"
    mode, _, layout = config.partition("-")
    nested = layout == "nested"
    root = tmp / config / "root"
    root.parent.mkdir(parents=True)
    cfg = root.parent / "hwagent.toml"
    cfg.write_text("[pressure]\nnetdev = false\niommu = false\nthermal = false\nblockio = false\nirq = false\n"
                   + ("runqlat = false\n" if args.no_bpf else "")
                   + "[cpu]\ntransition_period_s = 3.0\n[devices]\nenabled = false\n"
                   f"[runtime]\ncgroup_subtree = \"{subtree}\"\n"
                   + ("[cgroups]\nruntime_reclaimed_subtree = \"\"\n" if nested else "")
                   + (f"[advisor]\nenabled = true\nhold_record_s = 0.0\ntarget_us = {args.target}\n"
                      if mode in ("on", "floor") else ""))
    err = open(root.parent / "stderr.log", "w")
    d = subprocess.Popen([HWAGENT, "run", "--root-dir", str(root), "--config", str(cfg), "--metrics-address",
                          "127.0.0.1:0", "--mode", "standalone", "--lock-dir", str(root.parent / "locks")],
                         cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    samples = root.parent / "ls.txt"
    try:
        wait_for(lambda: "pressure ready" in (root.parent / "stderr.log").read_text(), "the daemon",
                 timeout=args.start_timeout)
        r = cli(root, "launch", "--name", "ls", "--qos", "shared", "--cpu-request", "100m", "--",
                "/usr/bin/python3", "-c", LS, str(samples))
        assert r.returncode == 0, r.stderr
        hogs = [] if mode == "floor" else [f"hog{i}" for i in range(args.hogs)]
        for h in hogs:
            r = cli(root, "launch", "--name", h, "--qos", "reclaimed", "--cpu-request", "100m", "--", "sh", "-c", HOG)
            assert r.returncode == 0, r.stderr
        want = ["ls", *hogs]
        ps = wait_for(lambda: (p := pods(root)) and all(p.get(n, {}).get("phase") == "Running" for n in want) and p,
                      "the pods to run", timeout=args.start_timeout)
        time.sleep(args.settle)
        t0, w0 = time.monotonic(), time.time()
        ps = pods(root)
        uids = {n: ps[n]["uid"] for n in want if n in ps}
        # the hogs are reclaimed pods: in the runtime's reclaimed subtree, derived from the bench's
        where = {n: subtree if n == "ls" or nested else derived_reclaimed_subtree(subtree) for n in uids}
        u0 = {n: usage_s(where[n], u) for n, u in uids.items()}
        d0, i0 = proc_cpu_s(d.pid), idle_s()
        tracer = start_attrib(subtree, uids, d.pid) if args.attrib else None
        try:
            time.sleep(args.window)
        except BaseException:
            if tracer:  # interrupted: the tracefs instance goes too
                tracer.stop()
            raise
        dt = time.monotonic() - t0
        attrib = stop_attrib(tracer, args.attrib) if tracer else None
        w1 = time.time()
        u1 = {n: usage_s(where[n], u) for n, u in uids.items()}
        d1, i1 = proc_cpu_s(d.pid), idle_s()
        load = Path("/proc/loadavg").read_text().split()[:3]
        ps = pods(root)
    finally:
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(60)
        except subprocess.TimeoutExpired:
            d.kill()
        kill_and_remove_subtree(subtree)
        err.close()
    if args.keep:  # the run's decisions, log and LS samples, for a look afterwards (or a recorded trace)
        dest = Path(args.keep) / tmp.name / config
        dest.mkdir(parents=True, exist_ok=True)
        for f in (root / "advisor" / "decisions.jsonl", root.parent / "stderr.log", samples):
            if f.exists():
                shutil.copy(f, dest / f.name)
    late = sorted(float(x.split()[1]) for x in samples.read_text().splitlines()
                  if w0 <= float(x.split()[0]) <= w1) if samples.exists() else []
    used = {n: u1[n] - u0[n] for n in u0}
    decided = [x for x in lines(root / "advisor" / "decisions.jsonl") if w0 <= x.get("wall_time", 0) <= w1]
    return {
        "config": config, "dt": dt, "late": late, "ls_cpu": used.get("ls", 0.0),
        "hog_cpu": sum(v for n, v in used.items() if n != "ls"), "hogs": len(hogs),
        "evicted": [e["pod_name"] for e in lines(root / "pressure" / "evictions.jsonl")],
        "changes": sum(1 for x in decided if x.get("action") != "hold"),
        "signal": [x["inputs"]["shared_p99_us"] for x in decided if x["inputs"].get("shared_p99_us") is not None],
        "quotas": [x["quota_cpus"] for x in decided], "daemon_cpu": d1 - d0, "load": load, "idle": i1 - i0,
        "running": sorted(n for n, p in ps.items() if p.get("phase") == "Running"), "attrib": attrib,
    }


def ls_tid(subtree: str, uid: str) -> int:
    """The LS loop's thread: the task under the LS pod's cpu cgroup running the loop's source."""
    for f in (Path("/sys/fs/cgroup/cpu") / subtree.lstrip("/") / f"pod{uid}").rglob("tasks"):
        for t in f.read_text().split():
            try:
                if b"time.monotonic" in Path(f"/proc/{t}/cmdline").read_bytes():
                    return int(t)
            except OSError:
                continue
    raise SystemExit("the LS loop's thread was not found under its pod cgroup")


def start_attrib(subtree: str, uids: dict[str, str], daemon_pid: int):
    """Trace the LS thread's wake-ups over the window (bench/advisor_attrib.py)."""
    from bench.advisor_attrib import Tracer

    daemon = {int(t) for t in os.listdir(f"/proc/{daemon_pid}/task")}
    by_uid = {u: ("ls pod" if n == "ls" else "hog") for n, u in uids.items()}

    def rules(tid: int, cg: str) -> str | None:
        if tid in daemon or tid == daemon_pid:
            return "daemon"
        if cg.startswith((subtree + "/", derived_reclaimed_subtree(subtree) + "/")):
            for u, cls in by_uid.items():
                if f"/pod{u}" in cg:
                    return cls
            return "bench subtree"
        return None

    t = Tracer(ls_tid(subtree, uids["ls"]), rules)
    t.start()
    return t


def stop_attrib(tracer, threshold: float) -> dict:
    from bench.advisor_attrib import attribute, summarize

    late, wakes = attribute(tracer.stop(), tracer.tid, threshold)
    return summarize(late, wakes, tracer.classes, tracer.cgroups)


def summary(runs: list[dict]) -> dict:
    """One configuration over its rounds: samples pooled, CPU and windows summed."""
    late = sorted(x for r in runs for x in r["late"])
    sig = [x for r in runs for x in r["signal"]]
    dt = sum(r["dt"] for r in runs)
    ls_cpu = sum(r["ls_cpu"] for r in runs)
    hog_cpu = sum(r["hog_cpu"] for r in runs)
    daemon = sum(r["daemon_cpu"] for r in runs)
    idle_left = (os.cpu_count() or 1) * dt - ls_cpu
    quotas = [q for r in runs for q in r["quotas"]]
    return {
        "config": runs[0]["config"], "rounds": len(runs), "window_s": round(dt, 1), "ls_samples": len(late),
        "ls_p50_us": round(statistics.median(late), 1) if late else None,
        "ls_p99_us": round(late[int(0.99 * (len(late) - 1))], 1) if late else None,
        "hog_cpu_s": round(hog_cpu, 2), "ls_cpu_s": round(ls_cpu, 2),
        "hogs_share_of_idle": round(hog_cpu / idle_left, 3) if runs[0]["hogs"] else None,
        # the node is shared: of the CPU the hogs got plus what nobody ran on, the hogs' share
        "hogs_share_of_free": round(hog_cpu / (hog_cpu + sum(r["idle"] for r in runs)), 3)
        if runs[0]["hogs"] and hog_cpu + sum(r["idle"] for r in runs) > 0 else None,
        "evictions": sum(len(r["evicted"]) for r in runs), "evicted": sorted({n for r in runs for n in r["evicted"]}),
        "changes_per_min": round(sum(r["changes"] for r in runs) * 60 / dt, 1),
        # the advisor's own signal: run-queue delay p99 of the LS pod per interval (median over the windows)
        "rq_p99_us_median": round(statistics.median(sig), 1) if sig else None,
        "quota_cpus_median": statistics.median([q if q is not None else float("inf") for q in quotas])
        if quotas else None,
        "cpu_s_all": round(daemon + ls_cpu + hog_cpu, 2), "daemon_cpu_s": round(daemon, 2),
        # what the VM's other processes (other engineers' runs) used meanwhile: busy CPU less ours
        "others_cpu_s": round(max(0.0, (os.cpu_count() or 1) * dt - sum(r["idle"] for r in runs)
                                  - (daemon + ls_cpu + hog_cpu)), 2),
        "loadavg": " / ".join(" ".join(r["load"]) for r in runs),
        # who ran while the LS waited > --attrib µs: class late-count (ms of delay), pooled over rounds
        "late_by": pooled_attrib(runs),
    }


def pooled_attrib(runs: list[dict]) -> str | None:
    if not any(r.get("attrib") for r in runs):
        return None
    n: dict[str, int] = {}
    ms: dict[str, float] = {}
    for r in runs:
        for cls, row in (r.get("attrib") or {}).get("by_class", {}).items():
            n[cls] = n.get(cls, 0) + row["n"]
            ms[cls] = ms.get(cls, 0.0) + row["delay_ms_sum"]
    wakes = sum((r.get("attrib") or {}).get("wakeups", 0) for r in runs)
    return f"{sum(n.values())}/{wakes}: " + ", ".join(f"{c} {n[c]} ({ms[c]:.0f} ms)" for c in sorted(n, key=lambda c: -n[c]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--window", type=float, default=15.0, help="measured seconds per configuration and round")
    ap.add_argument("--settle", type=float, default=6.0, help="seconds after the pods run before measuring")
    ap.add_argument("--rounds", type=int, default=2,
                    help="the configurations run in turn this many times (the node's own load drifts)")
    ap.add_argument("--hogs", type=int, default=3)
    ap.add_argument("--configs", default="floor,off,on")
    ap.add_argument("--target", type=float, default=None, help="[advisor] target_us (default: the config default)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-bpf", action="store_true",
                    help="run-queue delay from the schedstat fallback (no BPF compile: a TCG guest)")
    ap.add_argument("--start-timeout", type=float, default=120.0, help="seconds for a daemon to be ready")
    ap.add_argument("--attrib", type=float, nargs="?", const=300.0, default=None, metavar="US",
                    help="trace the LS thread's wake-ups over each window and print who ran while one waited "
                         "more than US µs (default 300; bench/advisor_attrib.py)")
    ap.add_argument("--keep", default=None, help="copy each run's decisions.jsonl, daemon log and LS samples here")
    args = ap.parse_args()
    if args.target is None:
        from agent.advisor.config import AdvisorConfig

        args.target = AdvisorConfig().target_us
    if os.geteuid() != 0:
        print("needs root (cgroups, BPF)", file=sys.stderr)
        return 2
    CLI_TIMEOUT[0] = max(120.0, args.start_timeout)
    configs = args.configs.split(",")
    runs: dict[str, list[dict]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="hwagent-bench-advisor-") as tmp:
        for i in range(args.rounds):
            for c in configs:
                r = one(c, args, Path(tmp) / f"r{i}")
                runs[c].append(r)
                print(json.dumps({k: v for k, v in r.items() if k not in ("late", "signal", "quotas", "attrib")}),
                      file=sys.stderr, flush=True)
                if r["attrib"]:
                    from bench.advisor_attrib import format_table

                    print(format_table(f"{c}, round {i + 1}, load {' '.join(r['load'])}", r["attrib"]),
                          file=sys.stderr, flush=True)
    out = [summary(runs[c]) for c in configs]
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    cols = ("config", "ls_p50_us", "ls_p99_us", "hog_cpu_s", "ls_cpu_s", "hogs_share_of_idle", "hogs_share_of_free",
            "evictions",
            "changes_per_min", "rq_p99_us_median", "quota_cpus_median", "cpu_s_all", "daemon_cpu_s", "others_cpu_s",
            "window_s",
            "loadavg") + (("late_by",) if args.attrib else ())
    print(f"target_us = {args.target:g}")
    print(" | ".join(cols))
    for r in out:
        print(" | ".join(str(r[c]) for c in cols))
    floor = next((r for r in out if r["config"] == "floor"), None)
    on = next((r for r in out if r["config"] == "on"), None)
    if floor and on and floor["ls_p99_us"] and on["ls_p99_us"]:
        print(f"LS p99 with the advisor / floor: {on['ls_p99_us'] / floor['ls_p99_us']:.2f}x (goal <= 2)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
