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

from agent.cgroups.config import CGROUPS_SECTION
from agent.pressure.config import PRESSURE_SECTION
from agent.cli import CommandError
from agent.commands._config import load_config
from agent.commands._format import add_format_option


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "probes",
        help="live view of run-queue delay per cgroup and block/net errors",
        description="Load the eBPF probes (falling back where they cannot run) and show, per interval, "
        "the cgroups with most run-queue delay (each named by its pod and container when the running daemon "
        "has that pod) and the devices with errors or latency. Needs root for BPF.",
    )
    p.add_argument("--config", metavar="FILE", help="TOML config ([pressure] section; default: the running daemon's)")
    p.add_argument("--root-dir", metavar="DIR",
                   help="read the config of the daemon running on DIR (when several run)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default 1)")
    p.add_argument("--top", type=int, default=10, help="cgroups to show (default 10)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--once", action="store_true", help="print one snapshot after one interval and exit")
    g.add_argument("--duration", type=float, help="run this many seconds, then exit")
    add_format_option(p, ("text", "json"), json_alias=True)  # json: one object per refresh
    p.set_defaults(func=run)


def pod_names(args: argparse.Namespace) -> dict[str, str]:
    """uid -> ``NAMESPACE/NAME`` of the daemon's pods, which name the rows (agent.pressure.view.pod_of);
    empty when no daemon answers (the rows then show their cgroup paths only)."""
    from agent.commands.ps import pages

    try:
        return {p["uid"]: f"{p['namespace']}/{p['name']}" for page in pages(args) for p in page["pods"]}
    except CommandError:
        return {}


def run(args: argparse.Namespace) -> int:
    # loaded only when run: keeps every other `hwagent` command quick to start
    from agent.pressure.engine import PressureEngine
    from agent.pressure.view import render, snapshot

    if args.interval <= 0:
        raise CommandError("--interval must be > 0")
    config = load_config(args)
    cfg = config[PRESSURE_SECTION]
    # a viewer never evicts
    engine = PressureEngine(cfg, mode="kubelet", cgroup_hierarchy=config[CGROUPS_SECTION].hierarchy)
    engine.load()
    try:
        engine.tick()
        end = time.monotonic() + (args.interval if args.once else args.duration or float("inf"))
        while True:
            prev_rq, prev_blk, t0 = dict(engine.last_runqueue), dict(engine.last_block.latency), time.monotonic()
            time.sleep(max(0.0, min(args.interval, end - t0)))
            engine.tick()
            s = snapshot(engine, prev_rq, prev_blk, max(1e-6, time.monotonic() - t0), args.top, pod_names(args))
            if args.format == "json":
                print(json.dumps(s), flush=True)
            else:
                if not args.once and args.duration is None and sys.stdout.isatty():
                    print("\033[2J\033[H", end="")
                print(render(s), flush=True)
            if time.monotonic() >= end - 1e-3:
                return 0
    finally:
        engine.close()
