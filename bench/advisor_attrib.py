"""Who delayed the LS pod (issue 26): each late wake-up of one thread, attributed from tracepoints.

``bench/advisor.py --attrib`` runs this over each configuration's measured window; run alone it
traces any thread (``.venv/bin/python bench/advisor_attrib.py trace TID SECONDS``) or compares
cgroup layouts without a daemon (``... layouts [--rounds N] [--window S]``, below).

There are no kprobes on this VM, but tracepoints work: a private tracefs instance records
``sched:sched_waking`` / ``sched:sched_wakeup`` (the traced thread only), every
``sched:sched_switch``, and ``timer:hrtimer_expire_entry`` (to see the scheduler tick) into a
ring buffer, read once at the end (no reader competes for the CPU during the window). For every
wake-up that waited more than ``--threshold`` µs from ``sched_waking`` to being switched in:
which tasks ran meanwhile on the CPU the wake-up chose (the one that ran longest is blamed),
that task's class (a hog, another thread of the LS pod, our daemon, the tracer, a kernel thread,
the idle task, or another process of the VM: other engineers' test runs), whether the delay
ended within ``TICK_SLACK_US`` of a scheduler tick on the CPU it ran on (the tick, not a wake-up
preemption, let it run) and whether it ran on another CPU than the wake-up chose (pulled there
by the load balancer, at a tick).

The tids' classes are snapshot from ``/proc`` every ``SNAP_S`` during the window (a
co-tenant's short-lived process may be gone by the end: it is "other (exited)").
"""

from __future__ import annotations

import collections
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TRACEFS = Path("/sys/kernel/tracing")
TICK_FUNCS = ("tick_nohz_handler", "tick_sched_timer")
TICK_SLACK_US = 60.0
SNAP_S = 0.5
BUFFER_KB = 32768

_LINE = re.compile(r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                   r"(?P<ts>\d+\.\d+): (?P<event>\w+): (?P<body>.*)$")
_KV = re.compile(r"(\w+)=(\S*)")


@dataclass
class Event:
    ts_us: float
    cpu: int
    name: str
    fields: dict[str, str]


@dataclass
class Late:
    """One late wake-up: when, how long, on which CPU, and who ran there meanwhile (µs each)."""
    wake_us: float
    delay_us: float
    cpu: int
    target_cpu: int
    #: tid -> µs it ran while the thread waited, on the CPU the wake-up chose (``target_cpu``)
    ran: dict[int, float] = field(default_factory=dict)
    comms: dict[int, str] = field(default_factory=dict)
    at_tick: bool = False

    @property
    def blamed(self) -> int:
        return max(self.ran, key=lambda t: self.ran[t]) if self.ran else -1


def parse(lines: Iterable[str]) -> list[Event]:
    """tracefs text lines -> events (lines that are not events are skipped)."""
    out = []
    for ln in lines:
        m = _LINE.match(ln)
        if not m:
            continue
        body = m["body"]
        if m["event"] == "sched_switch" and "==>" in body:
            a, b = body.split("==>", 1)
            f = {k: v for k, v in _KV.findall(a)}
            f.update({k: v for k, v in _KV.findall(b)})
        else:
            f = dict(_KV.findall(body))
        out.append(Event(float(m["ts"]) * 1e6, int(m["cpu"]), m["event"], f))
    out.sort(key=lambda e: e.ts_us)
    return out


def attribute(events: list[Event], tid: int, threshold_us: float = 300.0,
              tick_slack_us: float = TICK_SLACK_US) -> tuple[list[Late], int]:
    """Every wake-up of ``tid`` that waited over ``threshold_us`` before running; and the count of
    wake-ups. Pure: the events in time order (``parse``)."""
    cur: dict[int, tuple[int, str, float]] = {}  # cpu -> (tid running, comm, since µs)
    # per cpu: the (tid, comm, from, to) intervals since the pending wake-up
    spans: dict[int, list[tuple[int, str, float, float]]] = collections.defaultdict(list)
    ticks: dict[int, list[float]] = collections.defaultdict(list)
    pending: tuple[float, int] | None = None  # (waking µs, target cpu)
    wakes = 0
    late: list[Late] = []
    for e in events:
        f = e.fields
        if e.name == "hrtimer_expire_entry":
            if f.get("function", "").split("+")[0] in TICK_FUNCS:
                ticks[e.cpu].append(e.ts_us)
        elif e.name in ("sched_waking", "sched_wakeup") and int(f.get("pid", -1)) == tid:
            if pending is None:
                pending = (e.ts_us, int(f.get("target_cpu", e.cpu)))
                wakes += 1
                spans.clear()
                for c, (t, comm, _since) in cur.items():
                    spans[c].append((t, comm, e.ts_us, e.ts_us))
            else:
                pending = (pending[0], int(f.get("target_cpu", pending[1])))
        elif e.name == "sched_switch":
            prev, nxt = int(f.get("prev_pid", -1)), int(f.get("next_pid", -1))
            if pending is not None and spans[e.cpu]:
                t, comm, a, _b = spans[e.cpu][-1]
                spans[e.cpu][-1] = (t, comm, a, e.ts_us)
            elif pending is not None:  # no switch seen on this CPU before the wake-up: prev ran since
                spans[e.cpu].append((prev, f.get("prev_comm", "?"), pending[0], e.ts_us))
            if pending is not None and nxt == tid:
                t0, target = pending
                delay = e.ts_us - t0
                if delay > threshold_us:
                    late.append(_late(t0, e.ts_us, e.cpu, target, spans, ticks[e.cpu], tick_slack_us))
                pending = None
                spans.clear()
            elif pending is not None and prev != tid:
                spans[e.cpu].append((nxt, f.get("next_comm", "?"), e.ts_us, e.ts_us))
            cur[e.cpu] = (nxt, f.get("next_comm", "?"), e.ts_us)
            if prev == tid and nxt != tid:
                pending = None
    return late, wakes


def _late(t0: float, now: float, cpu: int, target: int, spans: dict[int, list[tuple[int, str, float, float]]],
          ticks: list[float], tick_slack_us: float) -> Late:
    """One late wake-up switched in at ``now`` on ``cpu``: who ran while it waited, a tick or not."""
    x = Late(t0, now - t0, cpu, target)
    # pulled to another CPU (load balance): it waited on the one the wake-up chose
    where = target if target != cpu and spans.get(target) else cpu
    if where != cpu:
        t, comm, a, _b = spans[where][-1]
        spans[where][-1] = (t, comm, a, now)
    for t, comm, a, b in spans.get(where, []):
        x.ran[t] = x.ran.get(t, 0.0) + max(0.0, b - max(a, t0))
        x.comms[t] = comm
    x.at_tick = any(now - tick_slack_us <= k <= now for k in ticks[-3:])
    return x


def classify(tid: int, comm: str, classes: Mapping[int, str]) -> str:
    """A tid's class: the snapshot's, else the idle task / a kernel thread by name, else other."""
    if tid == 0:
        return "idle"
    if tid in classes:
        return classes[tid]
    if re.match(r"(kworker|ksoftirqd|migration|rcu|kthreadd|irq/|khugepaged|kcompactd|kswapd|jbd2|cpuhp)", comm):
        return "kernel"
    return "other (exited)"


def summarize(late: list[Late], wakes: int, classes: Mapping[int, str],
              cgroups: Mapping[int, str] | None = None) -> dict:
    """Late wake-ups per blamed class: count, delay sum and p50, at-tick and migrated counts, top comms
    (with their cpu cgroup where known)."""
    by: dict[str, list[Late]] = collections.defaultdict(list)
    comms: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for x in late:
        b = x.blamed
        cls = classify(b, x.comms.get(b, "?"), classes)
        by[cls].append(x)
        cg = (cgroups or {}).get(b)
        comms[cls][x.comms.get(b, "?") + (f" {cg}" if cg and cls in ("other",) else "")] += 1
    rows = {}
    for cls, xs in sorted(by.items(), key=lambda kv: -len(kv[1])):
        ds = sorted(x.delay_us for x in xs)
        rows[cls] = {"n": len(xs), "delay_ms_sum": round(sum(ds) / 1000, 1), "delay_us_p50": round(ds[len(ds) // 2]),
                     "delay_us_max": round(ds[-1]), "at_tick": sum(x.at_tick for x in xs),
                     "other_cpu": sum(x.cpu != x.target_cpu for x in xs),
                     "comms": dict(comms[cls].most_common(4))}
    return {"wakeups": wakes, "late": len(late), "by_class": rows}


def snapshot_classes(rules: Callable[[int, str], str | None], into: dict[int, str],
                     cgroups: dict[int, str] | None = None) -> None:
    """Every tid now on the node -> its class (``rules(tid, cpu cgroup path)``; kernel threads by
    their empty cmdline / PF_KTHREAD; else other). Tids seen before keep their class."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            tid = int(t)
            if tid in into:
                continue
            try:
                cg = ""
                for ln in Path(f"/proc/{p}/task/{t}/cgroup").read_text().splitlines():
                    parts = ln.split(":", 2)
                    if "cpu" in parts[1].split(","):
                        cg = parts[2]
                flags = int(Path(f"/proc/{p}/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[6])
            except (OSError, ValueError, IndexError):
                continue
            cls = rules(tid, cg) if not flags & 0x00200000 else "kernel"  # PF_KTHREAD
            into[tid] = cls or "other"
            if cgroups is not None:
                cgroups[tid] = cg


class Tracer:
    """A private tracefs instance on one thread's wake-ups and every CPU's switches."""

    def __init__(self, tid: int, rules: Callable[[int, str], str | None]) -> None:
        self.tid = tid
        self.rules = rules
        self.dir = TRACEFS / "instances" / f"hwagent-attrib-{uuid.uuid4().hex[:6]}"
        self.classes: dict[int, str] = {os.getpid(): "tracer"}
        #: tid -> its cpu cgroup (which co-tenant an "other" is)
        self.cgroups: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _w(self, rel: str, value: str) -> None:
        (self.dir / rel).write_text(value)

    def start(self) -> None:
        self.dir.mkdir()
        self._w("buffer_size_kb", str(BUFFER_KB))
        self._w("trace_clock", "mono")
        for ev in ("sched/sched_waking", "sched/sched_wakeup"):
            self._w(f"events/{ev}/filter", f"pid == {self.tid}")
            self._w(f"events/{ev}/enable", "1")
        self._w("events/sched/sched_switch/enable", "1")
        self._w("events/timer/hrtimer_expire_entry/enable", "1")
        self._w("tracing_on", "1")
        self._thread = threading.Thread(target=self._snap, daemon=True)
        self._thread.start()

    def _snap(self) -> None:
        while True:
            snapshot_classes(self.rules, self.classes, self.cgroups)
            if self._stop.wait(SNAP_S):
                return

    def stop(self) -> list[Event]:
        """Stop tracing, read the buffer, remove the instance; the events in time order."""
        try:
            self._w("tracing_on", "0")
            self._stop.set()
            if self._thread:
                self._thread.join()
            lost = sum(int(m) for m in re.findall(r"overrun: (\d+)", "".join(
                (self.dir / "per_cpu" / c / "stats").read_text() for c in os.listdir(self.dir / "per_cpu"))))
            if lost:
                print(f"attrib: {lost} events overwritten (ring buffer full)", file=sys.stderr)
            with open(self.dir / "trace") as f:
                return parse(f)
        finally:
            for ev in ("sched/sched_waking", "sched/sched_wakeup", "sched/sched_switch", "timer/hrtimer_expire_entry"):
                try:
                    self._w(f"events/{ev}/enable", "0")
                except OSError:
                    pass
            try:
                self.dir.rmdir()
            except OSError as e:
                print(f"attrib: cannot remove {self.dir}: {e}", file=sys.stderr)


def format_table(name: str, s: dict) -> str:
    out = [f"who delayed the LS pod [{name}]: {s['late']} of {s['wakeups']} wake-ups waited > threshold",
           "  class | n | delay ms (sum) | p50 µs | max µs | ended at a tick | ran on another CPU | comms"]
    for cls, r in s["by_class"].items():
        out.append(f"  {cls} | {r['n']} | {r['delay_ms_sum']} | {r['delay_us_p50']} | {r['delay_us_max']} | "
                   f"{r['at_tick']} | {r['other_cpu']} | {r['comms']}")
    return "\n".join(out)


# -- layouts: where the reclaimed pods' idleness stops ------------------------------------------

#: a co-tenant like a test run: busy 20 ms, asleep 20 ms, in its own (non-idle) top-level cgroup
COTENANT = "import time\nwhile True:\n e = time.monotonic() + 0.02\n while time.monotonic() < e: pass\n time.sleep(0.02)\n"
HOG = "while :; do :; done"
CTLS = ("cpu", "cpuacct")


def _mk(rel: str, idle: bool = False, shares: int | None = None) -> None:
    for c in CTLS:
        os.makedirs(f"/sys/fs/cgroup/{c}/{rel}", exist_ok=True)
    if idle:
        Path(f"/sys/fs/cgroup/cpu/{rel}/cpu.idle").write_text("1")
    if shares:
        Path(f"/sys/fs/cgroup/cpu/{rel}/cpu.shares").write_text(str(shares))


def _spawn(rel: str, argv: list[str]):
    import subprocess

    def join() -> None:
        for c in CTLS:
            Path(f"/sys/fs/cgroup/{c}/{rel}/cgroup.procs").write_text(str(os.getpid()))
    return subprocess.Popen(argv, preexec_fn=join, stdout=subprocess.DEVNULL)


def _usage_s(rel: str) -> float:
    return int(Path(f"/sys/fs/cgroup/cpuacct/{rel}/cpuacct.usage").read_text()) / 1e9


def layout_run(layout: str, base: str, window: float, hogs: int, cotenants: int, out: Path) -> dict:
    """The LS loop (100m: cpu.shares 102) in ``<base>-pods/ls``; ``hogs`` spinning reclaimed pods,
    each its own cgroup with cpu.idle = 1, either beside the LS pod under ``<base>-pods`` (``nested``:
    the runtime's and the kubelet's layout) or under a top-level ``<base>-rec`` that is itself
    cpu.idle (``split``), or none (``floor``); ``cotenants`` processes in ``<base>-cot``."""
    from bench.advisor import LS, idle_s

    _mk(f"{base}-pods")
    _mk(f"{base}-pods/ls", shares=102)
    if layout == "split":
        _mk(f"{base}-rec", idle=True)
    hog_rels = [] if layout == "floor" else [f"{base}-{'rec' if layout == 'split' else 'pods'}/hog{i}" for i in range(hogs)]
    for r in hog_rels:
        _mk(r, idle=True)
    _mk(f"{base}-cot")
    procs = [_spawn(f"{base}-pods/ls", ["/usr/bin/python3", "-c", LS, str(out)])]
    procs += [_spawn(r, ["sh", "-c", HOG]) for r in hog_rels]
    procs += [_spawn(f"{base}-cot", ["/usr/bin/python3", "-c", COTENANT]) for _ in range(cotenants)]
    try:
        time.sleep(2.0)

        def rules(_tid: int, cg: str) -> str | None:
            return "hog" if cg.startswith(f"{base}-") and "/hog" in cg else \
                "co-tenant (synthetic)" if cg.startswith(f"{base}-cot") else None
        t = Tracer(procs[0].pid, rules)
        rels = {"ls": f"{base}-pods/ls", "hogs": hog_rels, "cot": f"{base}-cot"}
        u0 = {"ls": _usage_s(rels["ls"]), "hogs": sum(map(_usage_s, hog_rels)), "cot": _usage_s(rels["cot"])}
        w0, i0 = time.time(), idle_s()
        t.start()
        try:
            time.sleep(window)
        finally:
            events = t.stop()
        w1, i1 = time.time(), idle_s()
        u1 = {"ls": _usage_s(rels["ls"]), "hogs": sum(map(_usage_s, hog_rels)), "cot": _usage_s(rels["cot"])}
    finally:
        for p in procs:
            p.kill()
            p.wait()
    late_us = sorted(float(x.split()[1]) for x in out.read_text().splitlines() if w0 <= float(x.split()[0]) <= w1)
    late, wakes = attribute(events, procs[0].pid)
    return {"layout": layout, "late": late_us, "cpu": {k: u1[k] - u0[k] for k in u0},
            "attrib": summarize(late, wakes, t.classes, t.cgroups),
            "load": Path("/proc/loadavg").read_text().split()[0], "window": w1 - w0,
            # the VM's other processes: busy CPU less the LS, hogs and synthetic co-tenant
            "others": max(0.0, (os.cpu_count() or 1) * (w1 - w0) - (i1 - i0) - sum(u1[k] - u0[k] for k in u0))}


def _remove(base: str) -> None:
    from tests.cgroup_support import kill_and_remove_subtree

    for suffix in ("-pods", "-rec", "-cot"):
        kill_and_remove_subtree(base + suffix)


def layouts(argv: list[str]) -> int:
    import argparse
    import statistics

    ap = argparse.ArgumentParser(prog="advisor_attrib.py layouts")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--hogs", type=int, default=3)
    ap.add_argument("--cotenants", type=int, default=1)
    ap.add_argument("--layouts", default="floor,nested,split")
    args = ap.parse_args(argv)
    base = f"/hwagent-attrib-{uuid.uuid4().hex[:6]}"
    runs: dict[str, list[dict]] = collections.defaultdict(list)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hwagent-attrib-") as tmp:
        try:
            for i in range(args.rounds):
                for lay in args.layouts.split(","):
                    r = layout_run(lay, base, args.window, args.hogs, args.cotenants, Path(tmp) / f"{lay}{i}.txt")
                    runs[lay].append(r)
                    print(format_table(f"{lay}, round {i + 1}, load {r['load']}", r["attrib"]), file=sys.stderr,
                          flush=True)
        finally:
            _remove(base)
    print("layout | LS p50 µs | LS p99 µs | late > 300 µs | their delay ms | late behind hog / co-tenant / other | "
          "hogs CPU s | co-tenant CPU s | VM's other processes CPU s | LS CPU s | window s | load (1 min, per round)")
    for lay, rs in runs.items():
        late = sorted(x for r in rs for x in r["late"])
        n = {c: sum(r["attrib"]["by_class"].get(c, {}).get("n", 0) for r in rs) for c in
             ("hog", "co-tenant (synthetic)")}
        tot = sum(r["attrib"]["late"] for r in rs)
        ms = sum(row["delay_ms_sum"] for r in rs for row in r["attrib"]["by_class"].values())
        print(f"{lay} | {statistics.median(late):.0f} | {late[int(0.99 * (len(late) - 1))]:.0f} | {tot} of "
              f"{sum(r['attrib']['wakeups'] for r in rs)} | {ms:.0f} | {n['hog']} / {n['co-tenant (synthetic)']} / "
              f"{tot - sum(n.values())} | {sum(r['cpu']['hogs'] for r in rs):.2f} | "
              f"{sum(r['cpu']['cot'] for r in rs):.2f} | {sum(r['others'] for r in rs):.2f} | "
              f"{sum(r['cpu']['ls'] for r in rs):.2f} | "
              f"{sum(r['window'] for r in rs):.1f} | {', '.join(r['load'] for r in rs)}")
    return 0


def main() -> int:
    if os.geteuid() != 0:
        print("needs root (tracefs, cgroups)", file=sys.stderr)
        return 2
    if sys.argv[1:2] == ["layouts"]:
        return layouts(sys.argv[2:])
    if sys.argv[1:2] != ["trace"] or len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    tid, secs = int(sys.argv[2]), float(sys.argv[3])
    t = Tracer(tid, lambda _tid, _cg: None)
    t.start()
    try:
        time.sleep(secs)
    finally:
        events = t.stop()
    late, wakes = attribute(events, tid)
    print(format_table(str(tid), summarize(late, wakes, t.classes, t.cgroups)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
