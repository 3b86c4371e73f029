"""`hwagent topology`: show what the kernel says about CPUs, caches and NUMA."""

from __future__ import annotations

import argparse
import json
import os
import sys

from agent.cli import CommandError
from agent.topology.document import to_document
from agent.topology.render import render_text
from agent.topology.sysfs import TopologyError, read_topology

__all__ = ["add_parser"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "topology",
        help="show CPU, cache and NUMA topology",
        description=(
            "Read the CPU, core, cache and NUMA topology from sysfs and print it as a tree "
            "or as a JSON document. Point --sysfs-root at a snapshot's sys/ to read another machine."
        ),
    )
    p.add_argument("--sysfs-root", default="/sys", metavar="DIR", help="sysfs to read (default: /sys)")
    p.add_argument(
        "--procfs-root",
        default=None,
        metavar="DIR",
        help="procfs to read (default: /proc for /sys, otherwise the proc/ beside --sysfs-root)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.set_defaults(func=run)


def default_procfs_root(sysfs_root: str) -> str:
    """A snapshot's proc/ lies beside its sys/; mixing in this machine's /proc would mislead."""
    if os.path.abspath(sysfs_root) == "/sys":
        return "/proc"
    return os.path.join(os.path.dirname(os.path.abspath(sysfs_root)), "proc")


def run(args: argparse.Namespace) -> int:
    sysfs_root = args.sysfs_root
    procfs_root = args.procfs_root or default_procfs_root(sysfs_root)
    try:
        topo = read_topology(sysfs_root, procfs_root)
    except TopologyError as e:
        hint = ""
        if os.path.isdir(os.path.join(sysfs_root, "sys", "devices", "system", "cpu")):
            hint = f" (it looks like a snapshot root: try --sysfs-root {os.path.join(sysfs_root, 'sys')})"
        raise CommandError(f"{e}{hint}") from None
    if args.format == "json":
        json.dump(to_document(topo), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(topo))
    return 0
