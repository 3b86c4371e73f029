"""`hwagent ps`: the admitted pods, their CPUs, devices and phase, and bad static manifests."""

from __future__ import annotations

import argparse

from typing import Any

from agent.commands._admission import _nodes, add_common, age, call, dumps
from agent.commands._podstatus import status_word


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ps",
        help="list admitted pods",
        description="List the pods the daemon admitted: QoS, status (as kubectl names it: Running, "
        "Completed, Error, OOMKilled, CrashLoopBackOff, StartError, Evicted ...), restarts, CPUs, NUMA nodes and "
        "devices per container, age, and static manifest files that are not admitted (with why).",
    )
    add_common(p)
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def rows(resp: dict[str, Any]) -> list[list[str]]:
    """One row per container; STATUS is the pod's word as kubectl prints it (CrashLoopBackOff,
    OOMKilled, StartError, Completed ..., agent.commands._podstatus), RESTARTS the container's."""
    out = [["NAMESPACE", "NAME", "QOS", "STATUS", "CONTAINER", "RESTARTS", "CPUS", "NUMA", "DEVICES", "AGE"]]
    for pod in resp["pods"]:
        status = status_word(pod)
        for i, c in enumerate(pod["containers"]):
            devs = ",".join(f"{d['resource']}={d['id']}" for d in c["devices"]) or "-"
            numa = "any" if c["numa_affinity"] is None else _nodes(c["numa_affinity"])
            first = i == 0
            out.append([
                pod["namespace"] if first else "", pod["name"] if first else "", pod["qos"] if first else "",
                status if first else "", c["name"], str(c["restart_count"]), _nodes(c["cpu_ids"]), numa, devs,
                age(pod["admitted_at"]) if first else "",
            ])
    return out


def run(args: argparse.Namespace) -> int:
    resp = call(args, "GET", "/v1/pods", timeout=30)
    if args.format == "json":
        print(dumps(resp))
        return 0
    table = rows(resp)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    for e in resp["manifest_errors"]:
        print(f"manifest error: {e['path']}: {e['error']}")
    return 0
