"""`hwagent status`: what the running daemon is doing, in one screen (or JSON).

Asks the daemon over its root-only status socket (``<root>/status-http.sock``, HTTP/JSON: the
same answers as the gRPC ``status.sock``, without grpc's imports; agent.status.httpapi); exits
1 with the reason when no daemon answers (there is no checkpoint of "what it is doing"). The
socket is root's: anyone else is told so, and what to run instead (exit 5), never that the
daemon is not running (``agent.status.client.NotAllowed``).
"""

from __future__ import annotations

import time

from agent.cli import CommandError
from agent.commands._flags import Flag, add, parse

#: typing and argparse are not imported at run time (agent.commands._flags); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import SimpleNamespace
    from typing import Any

#: status's flags, defined once for argparse and the plain reader (agent.commands._flags)
FLAGS = (
    Flag("--config", metavar="FILE", help="TOML config file (for root_dir)"),
    Flag("--root-dir", metavar="DIR", help="hwagent's root dir (overrides the config)"),
    Flag("--format", choices=("text", "json"), default="text"),
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "status",
        help="ask the running daemon what it is doing",
        description="Mode and why, each component's health, probe modes, resources, pods known and "
        "the last evictions, from the running daemon (over its root-only status socket). Root only: the status "
        "names every user's pods; another user is told so (exit 5), and `hwagent ps` shows a member of "
        "the socket group its own pods.",
    )
    add(p, FLAGS)
    p.set_defaults(func=run)


def fast_args(argv: Sequence[str]) -> SimpleNamespace | None:
    """``argv`` (after ``status``) read without argparse, or None where argparse must read it (agent.cli)."""
    return parse(FLAGS, argv, func=run)


def as_dict(resp: Any) -> dict[str, Any]:
    """A gRPC ``GetStatusResponse`` as the status document (agent.status.document)."""
    from agent.status.document import status_document

    return status_document(resp)


def _evidence(evidence: Any) -> str:
    """An eviction's evidence on one line, as ``json.dumps(evidence, sort_keys=True)`` writes it
    (through the C encoder alone: ``json`` is milliseconds of the client's start-up)."""
    from agent.commands._jsonc import dumps

    return dumps(evidence, sort_keys=True)


def render(d: dict[str, Any]) -> str:
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
                     f"{_evidence(e['evidence'])}")
    return "\n".join(lines)


def root_dir_of(args: argparse.Namespace) -> str:
    """The daemon's root dir: ``--root-dir``, else ``[daemon] root_dir`` of ``--config`` read alone, else
    the running daemon's (agent.commands._config.daemon_root_dir: no config loader on this path)."""
    from agent.commands._config import daemon_root_dir

    return daemon_root_dir(args)


def run(args: argparse.Namespace) -> int:
    from agent.commands._exitcodes import EXIT_NO_DAEMON
    from agent.status.client import DaemonNotRunning, NotAllowed, StatusError, ask_status

    root = root_dir_of(args)
    try:
        d = ask_status(root)
    except NotAllowed as e:
        raise CommandError(e.message("status"), EXIT_NO_DAEMON) from None
    except DaemonNotRunning as e:
        raise CommandError(f"hwagent is not running with root dir {root}: {e}") from None
    except StatusError as e:
        raise CommandError(f"status: {e.code}: {e.message}") from None
    if args.format == "json":
        from agent.commands._admission import dumps

        print(dumps(d))
    else:
        print(render(d))
    return 0
