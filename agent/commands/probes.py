"""`hwagent probes`: live view of what the pressure probes see.

Top cgroups by run-queue delay, block devices by errors and latency, net TX
failures, each probe's mode (bpf or the fallback in use). ``--once`` prints one
snapshot after one interval; ``--duration`` runs for that long (scripting, tests).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from agent.cli import CommandError
from agent.config import ConfigError, load
from agent.pressure.hist import Histogram
from agent.pressure.readers import block_name


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "probes",
        help="live view of run-queue delay per cgroup and block/net errors",
        description="Load the eBPF probes (falling back where they cannot run) and show, per interval, "
        "the cgroups with most run-queue delay and the devices with errors or latency. Needs root for BPF.",
    )
    p.add_argument("--config", metavar="FILE", help="TOML config ([pressure] section)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default 1)")
    p.add_argument("--top", type=int, default=10, help="cgroups to show (default 10)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--once", action="store_true", help="print one snapshot after one interval and exit")
    g.add_argument("--duration", type=float, help="run this many seconds, then exit")
    p.add_argument("--json", action="store_true", help="one JSON object per refresh")
    p.set_defaults(func=run)


def _delta(cur: dict, prev: dict) -> dict:
    return {k: v - prev.get(k, Histogram()) for k, v in cur.items()}


def snapshot(engine, prev_rq: dict, prev_blk: dict, dt: float, top: int) -> dict:
    rq = _delta(engine.last_runqueue, prev_rq)
    cg = sorted(rq.items(), key=lambda kv: -kv[1].sum_ns)[:top]
    lat = _delta(engine.last_block.latency, prev_blk)
    devs: dict[str, dict] = {}
    for (dev, op), h in lat.items():
        if h.count or h.sum_ns:
            d = devs.setdefault(dev, {"name": block_name(dev, engine.sysfs_root), "errors": 0, "ops": {}})
            d["ops"][op] = {"ios": h.count, "p99_us": h.quantile_us(0.99) if h.slots else None}
    for dev, n in engine.last_block.errors_by_device().items():
        devs.setdefault(dev, {"name": block_name(dev, engine.sysfs_root), "errors": 0, "ops": {}})["errors"] = n
    return {
        "probes": {n: m for n, (m, _d) in engine.status().items()},
        "cgroups": [
            {"cgroup": p, "wait_s_per_s": round(h.sum_ns / 1e9 / dt, 4), "switch_ins": h.count,
             "p99_us": h.quantile_us(0.99) if h.slots else None}
            for p, h in cg
        ],
        "block": devs,
        "net": {n: c.__dict__ for n, c in engine.last_net.items() if c.tx_errors or c.tx_busy or c.tx_timeouts},
        "unhealthy": {f"{k}:{d}": r for (k, d), r in engine.health.tracker.unhealthy().items()},
        "evictions": len(engine.record.recent),
    }


def render(s: dict) -> str:
    lines = ["probes: " + "  ".join(f"{n}={m}" for n, m in s["probes"].items())]
    lines.append(f"{'CGROUP':<60} {'WAIT s/s':>9} {'SWITCH-INS':>10} {'p99 us':>8}")
    for c in s["cgroups"]:
        p99 = "-" if c["p99_us"] is None else f"{c['p99_us']:.0f}"
        lines.append(f"{c['cgroup'][-60:]:<60} {c['wait_s_per_s']:>9.3f} {c['switch_ins']:>10} {p99:>8}")
    lines.append(f"{'DEVICE':<16} {'ERRORS':>7}  OPS")
    for dev, d in sorted(s["block"].items(), key=lambda kv: (-kv[1]["errors"], kv[0])):
        ops = " ".join(f"{op}:{v['ios']}@p99<{v['p99_us'] or '-'}us" for op, v in sorted(d["ops"].items()))
        lines.append(f"{d['name'] + ' ' + dev:<16} {d['errors']:>7}  {ops}")
    for n, c in s["net"].items():
        lines.append(f"net {n}: {c}")
    for k, r in s["unhealthy"].items():
        lines.append(f"UNHEALTHY {k}: {r}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from agent.pressure.engine import PressureEngine  # noqa: PLC0415 - keeps `hwagent --help` fast

    if args.interval <= 0:
        raise CommandError("--interval must be > 0")
    try:
        cfg = load(args.config)["pressure"]
    except ConfigError as e:
        raise CommandError(str(e)) from None
    engine = PressureEngine(cfg, {}, mode="kubelet")  # a viewer never evicts
    engine.load()
    try:
        engine.tick()
        end = time.monotonic() + (args.interval if args.once else args.duration or float("inf"))
        while True:
            prev_rq, prev_blk, t0 = dict(engine.last_runqueue), dict(engine.last_block.latency), time.monotonic()
            time.sleep(max(0.0, min(args.interval, end - t0)))
            engine.tick()
            s = snapshot(engine, prev_rq, prev_blk, max(1e-6, time.monotonic() - t0), args.top)
            if args.json:
                print(json.dumps(s), flush=True)
            else:
                if not args.once and args.duration is None and sys.stdout.isatty():
                    print("\033[2J\033[H", end="")
                print(render(s), flush=True)
            if time.monotonic() >= end - 1e-3:
                return 0
    finally:
        engine.close()
