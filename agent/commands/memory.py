"""`hwagent memory`: memory and hugepages per NUMA node, and each placed container's blocks.

Asks the running daemon (``<root>/status.sock``, the memory manager's live
state): per node and resource (``memory``, ``hugepages-<size>``) the total,
the system's reservation, allocatable, allocated and free bytes. Without a
running daemon there is no allocation to show; ``hwagent topology`` shows the
machine's memory per node.
"""

from __future__ import annotations

import argparse
import json

from agent.cli import CommandError
from agent.commands._format import add_format_option


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "memory",
        help="show memory and hugepages per NUMA node",
        description="Show the memory manager's accounting per NUMA node and memory resource (memory, "
        "hugepages-<size>): total, reserved, allocatable, allocated, free; and the memory blocks of each "
        "container it placed, with their nodes. Asks the running daemon (root only: it names every user's "
        "pods; another user is told so, exit 5).",
    )
    p.add_argument("--config", metavar="FILE", help="TOML config file (for [daemon] root_dir)")
    p.add_argument("--root-dir", metavar="DIR", help="hwagent root dir holding status.sock")
    add_format_option(p, ("text", "json"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import grpc

    from agent.commands._config import daemon_root
    from agent.commands._exitcodes import EXIT_NO_DAEMON
    from agent.status.client import DaemonNotRunning, NotAllowed, get_view

    root = daemon_root(args)
    try:
        view = get_view(root, "memory")
    except NotAllowed as e:
        raise CommandError(e.message("memory"), EXIT_NO_DAEMON) from None
    except DaemonNotRunning as e:
        raise CommandError(f"no running daemon to ask ({e}); start hwagent run, or point --root-dir at its root") from None
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.FAILED_PRECONDITION:
            raise CommandError(f"{e.details()} (enable it with [memory] enabled = true)") from None
        raise CommandError(f"status socket: {e.code().name}: {e.details()}") from None
    if args.format == "json":
        print(json.dumps(view, indent=2))
    else:
        from agent.status.memoryview import render_memory

        print(render_memory(view))
    return 0
