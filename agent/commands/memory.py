"""`hwagent memory`: memory and hugepages per NUMA node, and each placed container's blocks.

Asks the running daemon (``<root>/status.sock``, the memory manager's live
state): per node and resource (``memory``, ``hugepages-<size>``) the total,
the system's reservation, allocatable, allocated and free bytes. Without a
running daemon there is no allocation to show; ``hwagent topology`` shows the
machine's memory per node.
"""

from __future__ import annotations

from agent.cli import CommandError
from agent.commands._flags import Flag, add, parse

#: typing and argparse are not imported at run time (agent.commands._flags); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import SimpleNamespace

#: memory's flags, defined once for argparse and the plain reader (agent.commands._flags)
FLAGS = (
    Flag("--config", metavar="FILE", help="TOML config file (for [daemon] root_dir)"),
    Flag("--root-dir", metavar="DIR", help="hwagent root dir holding status.sock"),
    Flag("--format", choices=("text", "json"), default="text", help="output format: text, json (default text)"),
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "memory",
        help="show memory and hugepages per NUMA node",
        description="Show the memory manager's accounting per NUMA node and memory resource (memory, "
        "hugepages-<size>): total, reserved, allocatable, allocated, free; and the memory blocks of each "
        "container it placed, with their nodes. Asks the running daemon (root only: it names every user's "
        "pods; another user is told so, exit 5).",
    )
    add(p, FLAGS)
    p.set_defaults(func=run)


def fast_args(argv: Sequence[str]) -> SimpleNamespace | None:
    """``argv`` (after ``memory``) read without argparse, or None where argparse must read it (agent.cli)."""
    return parse(FLAGS, argv, func=run)


def run(args: argparse.Namespace) -> int:
    from agent.commands._config import daemon_root_dir
    from agent.commands._exitcodes import EXIT_NO_DAEMON
    from agent.status.client import DaemonNotRunning, NotAllowed, StatusError, ask_view

    root = daemon_root_dir(args)
    try:
        view = ask_view(root, "memory")
    except NotAllowed as e:
        raise CommandError(e.message("memory"), EXIT_NO_DAEMON) from None
    except DaemonNotRunning as e:
        raise CommandError(f"no running daemon to ask ({e}); start hwagent run, or point --root-dir at its root") from None
    except StatusError as e:
        if e.code == "FAILED_PRECONDITION":
            raise CommandError(f"{e.message} (enable it with [memory] enabled = true)") from None
        raise CommandError(f"status socket: {e.code}: {e.message}") from None
    if args.format == "json":
        import json

        print(json.dumps(view, indent=2))
    else:
        from agent.status.memoryview import render_memory

        print(render_memory(view))
    return 0
