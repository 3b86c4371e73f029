"""`hwagent admit [--dry-run] FILE`: admit a manifest, or say what it would get and why."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agent.cli import CommandError
from agent.commands.launch import read_manifest
from agent.commands._admission import EXIT_REFUSED, _nodes, add_common, call, container_line, dumps, format_pod_line


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("admit", help="admit a Pod manifest, or --dry-run: what would it get, and why",
                              description="Send a Pod manifest (YAML or JSON, - for stdin) to the daemon. With "
                              "--dry-run nothing is allocated or written: the admission's own decision is printed, per "
                              "container the NUMA affinity, CPUs, memory nodes and devices it would get, and what is "
                              "free per NUMA node; the exit status is 1 when it would be refused.")
    add_common(p)
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="the Pod manifest (YAML or JSON; - for stdin): a regular file of at most 1 MiB")
    p.add_argument("-f", "--file", dest="file_flag", metavar="FILE", help="the same, as `hwagent launch -f` takes it")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--ignore-unknown-fields", action="store_true")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.file is None) == (args.file_flag is None):
        raise CommandError("give the manifest once: hwagent admit [--dry-run] FILE, or -f FILE")
    query = {k: "1" for k, on in (("dry_run", args.dry_run), ("ignore_unknown_fields", args.ignore_unknown_fields))
             if on}
    resp = call(args, "POST", "/v1/pods", read_manifest(args.file or args.file_flag), query=query, timeout=120)
    for w in resp["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    if not args.dry_run:
        if args.format == "json":
            print(dumps(resp["pod"]))
        else:
            print(f"admitted {format_pod_line(resp['pod'])}")
            for c in resp["pod"]["containers"]:
                print(container_line(c))
        return 0
    if args.format == "json":
        print(dumps({k: resp[k] for k in ("would_admit", "reason", "free", "containers")}))
    else:
        print("would be admitted" if resp["would_admit"] else f"would be refused: {resp['reason']}")
        for d in resp["containers"]:
            print(decision_line(d))
        print(resp["free"])
    return 0 if resp["would_admit"] else EXIT_REFUSED


def decision_line(d: dict[str, Any]) -> str:
    """``  main: NUMA 1 (preferred), cpus 2-3, memory nodes 1, devices example.com/dev=d1 (NUMA 1)``"""
    where = "any NUMA node" if d["numa_nodes"] is None else f"NUMA {_nodes(d['numa_nodes'])}"
    line = (f"  {d['name']}: {where} ({'preferred' if d['preferred'] else 'not preferred'}), "
            f"cpus {_nodes(d['cpu_ids'])}")
    if d["mems"]:
        line += f", memory nodes {_nodes(d['mems'])}"
    devs = ", ".join(f"{x['resource']}={x['id']}" + (f" (NUMA {_nodes(x['numa_nodes'])})" if x["numa_nodes"] else "")
                     for x in d["devices"])
    if devs:
        line += f", devices {devs}"
    return line + ("" if d["admit"] else f" refused: {d['reason']}")
