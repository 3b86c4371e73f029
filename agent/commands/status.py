"""`hwagent status`: what the running daemon is doing, in one screen (or JSON).

Asks the daemon over ``<root>/status.sock``; exits 1 with the reason when no
daemon answers (there is no checkpoint of "what it is doing"). The socket is
root's: anyone else is told so, and what to run instead (exit 5), never that the
daemon is not running (``agent.status.client.NotAllowed``).
"""

from __future__ import annotations

import argparse
import json
import time

from agent.cli import CommandError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "status",
        help="ask the running daemon what it is doing",
        description="Mode and why, each component's health, probe modes, resources, pods known and "
        "the last evictions, from the running daemon (over <root>/status.sock). Root only: the status "
        "names every user's pods; another user is told so (exit 5), and `hwagent ps` shows a member of "
        "the socket group its own pods.",
    )
    p.add_argument("--config", metavar="FILE", help="TOML config file (for root_dir)")
    p.add_argument("--root-dir", metavar="DIR", help="hwagent's root dir (overrides the config)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def as_dict(resp) -> dict:
    from google.protobuf.json_format import MessageToDict

    d = MessageToDict(resp, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    for ev in d.get("evictions", []):
        ev["evidence"] = json.loads(ev.pop("evidence_json") or "{}")
    d["format"] = "hwagent-status/1"
    return d


def render(d: dict) -> str:
    lines = [f"mode: {d['mode']} ({d['mode_reason']})   phase: {d['phase']}   pid: {d['pid']}   "
             f"up: {float(d['uptime_seconds']):.0f}s"]
    lines.append("components:")
    for c in d["components"]:
        state = "healthy" if c["healthy"] else "UNHEALTHY"
        lines.append(f"  {c['name']:<26} {state:<9} {c['detail']}")
    if d["probes"]:
        lines.append("probes:")
        for p in d["probes"]:
            lines.append(f"  {p['name']:<9} {p['mode']:<8} {p['detail']}")
    lines.append("resources:" if d["resources"] else "resources: none")
    for r in d["resources"]:
        lines.append(f"  {r['name']:<32} capacity={r['capacity']} allocatable={r['allocatable']} "
                     f"allocated={r['allocated']} ({r['source']})")
    lines.append(f"pods: {len(d['pods'])}" + (f" (from {d['pods_source']})" if d["pods_source"] else ""))
    for p in d["pods"]:
        who = f"{p['namespace']}/{p['name']}" if p["namespace"] else p["name"]
        extra = f" devices={','.join(p['devices'])}" if p["devices"] else ""
        lines.append(f"  {who:<40} qos={p['qos'] or '-':<10} containers={','.join(p['containers']) or '-'}{extra}")
    lines.append("last evictions:" if d["evictions"] else "last evictions: none")
    for e in d["evictions"]:
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e["wall_time"]))
        lines.append(f"  {at} {e['namespace']}/{e['pod']} {e['reason']} ({e['signal']}) action={e['action']} "
                     f"{json.dumps(e['evidence'], sort_keys=True)}")
    return "\n".join(lines)


def root_dir_of(args: argparse.Namespace) -> str:
    from agent.commands._config import load_config, root_dir

    return str(root_dir(args, load_config(args)))


def run(args: argparse.Namespace) -> int:
    import grpc

    from agent.commands._exitcodes import EXIT_NO_DAEMON
    from agent.status.client import DaemonNotRunning, NotAllowed, get_status

    root = root_dir_of(args)
    try:
        resp = get_status(root)
    except NotAllowed as e:
        raise CommandError(e.message("status"), EXIT_NO_DAEMON) from None
    except DaemonNotRunning as e:
        raise CommandError(f"hwagent is not running with root dir {root}: {e}") from None
    except grpc.RpcError as e:
        raise CommandError(f"status: {e.code().name}: {e.details()}") from None
    d = as_dict(resp)
    print(json.dumps(d, indent=2, sort_keys=True) if args.format == "json" else render(d))
    return 0
