"""`hwagent resources`: device-plugin resources, endpoints, health and allocations.

Asks the running daemon first (``<root>/status.sock``): in standalone mode its
device-plugin host, in kubelet mode its built-in plugins with the pod holding
each device. When no daemon answers it reads the device manager's snapshot and
replays its journal (changing no file): allocations are as the daemon last made
them durable; device health and endpoints are as of the last snapshot, which the
host writes in the background when they change and when it stops (the age is
printed). The first line says which.
"""

from __future__ import annotations

import time

from agent.cli import CommandError
from agent.commands._flags import Flag, add, parse

#: typing, argparse, pathlib and the config loader are not imported on the live path (a running daemon
#: asked over its root-only HTTP socket: bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from pathlib import Path
    from types import SimpleNamespace

#: resources's flags, defined once for argparse and the plain reader (agent.commands._flags)
FLAGS = (
    Flag("--config", metavar="FILE", help="TOML config file (default: embedded defaults)"),
    Flag("--root-dir", metavar="DIR", help="hwagent's root dir (overrides the config)"),
    Flag("--checkpoint", metavar="FILE", help="read this checkpoint file instead"),
    Flag("--format", choices=("text", "json"), default="text", help="output format: text, json (default text)"),
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "resources",
        help="show device-plugin resources, endpoints, health and allocations",
        description="Show what hwagent's device-plugin host knows: per resource the capacity, "
        "allocatable count, endpoints (connected/stopped), each device's health and NUMA nodes, "
        "and the containers holding devices. Root only (it names every user's pods): another user is "
        "told so, exit 5.",
    )
    add(p, FLAGS)
    p.set_defaults(func=run)


def fast_args(argv: Sequence[str]) -> SimpleNamespace | None:
    """``argv`` (after ``resources``) read without argparse, or None where argparse must read it (agent.cli)."""
    return parse(FLAGS, argv, func=run)


def _dumps(doc: dict) -> str:
    import json

    return json.dumps(doc, indent=2, sort_keys=True)


def checkpoint_path(args: argparse.Namespace) -> Path:
    from pathlib import Path

    if args.checkpoint:
        return Path(args.checkpoint)
    from agent.commands._config import load_config, root_dir
    from agent.status.offline import device_checkpoint_path

    config = load_config(args)
    return device_checkpoint_path(config, root_dir(args, config))


def render_text(view: dict, path: Path | None, age: float) -> str:
    head = f"live daemon: {view.get('source', '')}" if path is None else f"checkpoint {path} (written {age:.0f}s ago)"
    lines = [head, ""]
    if not view["resources"]:
        lines.append("no device-plugin resources")
    for name, r in view["resources"].items():
        lines.append(f"{name}  capacity={r['capacity']} allocatable={r['allocatable']} allocated={r['allocated']}")
        for e in r["endpoints"]:
            lines.append(f"  endpoint {e['socket'] or '-'} {e['state']}")
        for d in r["devices"]:
            numa = ",".join(map(str, d["numa"])) or "-"
            used = " allocated" if d["allocated"] else ""
            holder = d.get("holder")
            used = f" held by {holder['namespace']}/{holder['pod']}/{holder['container']}" if holder else used
            lines.append(f"  device {d['id']:<24} {d['health']:<9} numa={numa}{used}")
    if view["deleted_resources"]:
        lines.append(f"deleted after grace period: {', '.join(view['deleted_resources'])}")
    lines.append("")
    if view["allocations"]:
        lines.append("allocations:")
        for a in view["allocations"]:
            who = f"{a['namespace']}/{a['pod']}" if a["pod"] else a["pod_uid"]
            lines.append(
                f"  {who} {a['container']} ({a['container_type']}) {a['resource']}: "
                f"{','.join(a['devices'])} numa={','.join(map(str, a['numa'])) or '-'}"
            )
    else:
        lines.append("no allocations")
    return "\n".join(lines)


def _live(args: argparse.Namespace) -> tuple[dict | None, str]:
    """The live daemon's view, or (None, why not)."""
    from agent.commands._config import daemon_root_dir
    from agent.commands._exitcodes import EXIT_NO_DAEMON
    from agent.status.client import DaemonNotRunning, NotAllowed, StatusError, ask_view

    root = daemon_root_dir(args)
    try:
        return ask_view(root, "resources"), ""
    except NotAllowed as e:  # the checkpoint is root's too: no fallback to it
        raise CommandError(e.message("resources"), EXIT_NO_DAEMON) from None
    except DaemonNotRunning as e:
        return None, str(e)
    except StatusError as e:
        return None, f"the daemon has no device-plugin part ({e.message})"


def run(args: argparse.Namespace) -> int:
    live, why_not = (None, "--checkpoint given") if args.checkpoint else _live(args)
    if live is not None:
        live["source_kind"] = "live"
        print(_dumps(live) if args.format == "json" else render_text(live, None, 0.0))
        return 0
    from agent.status.offline import StateUnreadable, device_view, read_device_checkpoint

    path = checkpoint_path(args)
    try:
        data = read_device_checkpoint(path)
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        raise CommandError(
            f"no running daemon ({why_not}) and no device-manager checkpoint at {path} "
            "(the checkpoint exists only after hwagent ran in standalone mode)"
        ) from None
    except StateUnreadable as e:
        raise CommandError(str(e)) from None
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror}") from None
    view = device_view(data)
    view["source"] = f"checkpoint {path}"
    view["source_kind"] = "checkpoint"
    if args.format == "json":
        print(_dumps(view))
    else:
        print(render_text(view, path, age))
    return 0
