"""`hwagent cpus`: CPU pools and allocations per NUMA node, as a table or JSON.

Asks the running daemon first (``<root>/status.sock``, live state with pools);
without one it reads the CPU policy's checkpoint under the root dir. With
``--socket`` it asks a running plugin over the ResourcePlugin API instead, which
is what the kubelet sees; pools are not part of that API and show as n/a. The
output's ``source`` says which.
"""

from __future__ import annotations

import os

from agent.cli import CommandError
from agent.commands._flags import Flag, add, parse

#: typing, argparse and pathlib are not imported on the live path (a running daemon asked over its
#: root-only HTTP socket: bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from pathlib import Path
    from types import SimpleNamespace

#: cpus's flags, defined once for argparse and the plain reader (agent.commands._flags); ``--json``
#: (an alias of ``--format json``) is argparse's alone
FLAGS = (
    Flag("--config", metavar="FILE", help="TOML config file (for root_dir and sysfs_root)"),
    Flag("--root-dir", metavar="DIR", help="hwagent root dir holding cpu/cpu_plugin_state.json"),
    Flag("--socket", metavar="PATH", help="query a running cpu plugin on this unix socket instead"),
    Flag("--sysfs-root", metavar="DIR", help="sysfs to read the NUMA layout from (default: config)"),
    Flag("--format", choices=("text", "json"), default="text", help="output format: text, json (default text)"),
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "cpus",
        help="show CPU pools and allocations per NUMA node",
        description="Show the CPU policy's pools and container cpusets per NUMA node. Root only (it "
        "names every user's pods): another user is told so, exit 5.",
    )
    add(p, FLAGS)
    p.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    p.set_defaults(func=run)


def fast_args(argv: Sequence[str]) -> SimpleNamespace | None:
    """``argv`` (after ``cpus``) read without argparse, or None where argparse must read it (agent.cli)."""
    return parse(FLAGS, argv, func=run)


def _dumps(doc: dict) -> str:
    import json

    return json.dumps(doc, indent=2)


def _numa_cpus(sysfs_root: str, procfs_root: str):
    from agent.cpuset import CPUSet
    from agent.topology.sysfs import read_topology

    topo = read_topology(sysfs_root, procfs_root)
    out: dict[int, CPUSet] = {}
    for c in topo.cpus:
        n = c.numa_node if c.numa_node is not None else 0
        out[n] = out.get(n, CPUSet()) | CPUSet([c.id])
    return out


def _from_checkpoint(root: Path):
    from agent.status.offline import StateUnreadable, read_cpu_checkpoint

    try:
        cp = read_cpu_checkpoint(root)
    except StateUnreadable as e:
        raise CommandError(str(e)) from None
    return cp.pools, cp.allocations, cp.source


def _from_socket(sock: str):
    import grpc

    from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
    from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
    from agent.cpu.view import Allocation
    from agent.cpuset import CPUSet
    from agent.unixsock import dial

    sock = os.path.abspath(sock)  # named relative to where the operator stands
    try:
        with dial(sock, "resourceplugin") as ch:
            stub = pb_grpc.ResourcePluginStub(ch)
            resp = stub.GetResourcesAllocation(pb.GetResourcesAllocationRequest(), timeout=5)
            allocs = []
            for uid, cr in resp.pod_resources.items():
                for cname, ra in cr.container_resources.items():
                    info = ra.resource_allocation.get("cpu")
                    if info is None:
                        continue
                    t = stub.GetTopologyAwareResources(
                        pb.GetTopologyAwareResourcesRequest(pod_uid=uid, container_name=cname), timeout=5
                    )
                    allocs.append(Allocation(uid, t.pod_namespace, t.pod_name, cname, "", "",
                                             CPUSet.parse(info.allocation_result)))  # fmt: skip
    except grpc.RpcError as e:
        raise CommandError(f"cpu plugin at {sock}: {e.code().name}: {e.details()}") from None
    return None, allocs, f"socket {sock}"


def _live(root_dir: str) -> dict | None:
    """The running daemon's CPU view, or None when no daemon (or no CPU policy in it) answers."""
    from agent.commands._exitcodes import EXIT_NO_DAEMON
    from agent.status.client import DaemonNotRunning, NotAllowed, StatusError, ask_view

    try:
        return ask_view(root_dir, "cpus")
    except NotAllowed as e:  # the checkpoint is root's too: no fallback to it
        raise CommandError(e.message("cpus"), EXIT_NO_DAEMON) from None
    except DaemonNotRunning:
        return None
    except StatusError as e:
        if e.code == "FAILED_PRECONDITION":
            return None
        raise CommandError(f"status socket: {e.code}: {e.message}") from None


def run(args: argparse.Namespace) -> int:
    if not args.socket:
        # the daemon's root dir alone (no config loader) to ask it; the config only when it does not answer
        from agent.commands._config import daemon_root_dir

        live = _live(daemon_root_dir(args))
        if live is not None:
            from agent.cpu.view import render_table

            print(_dumps(live) if args.format == "json" else render_table(live))
            return 0
    from agent.commands._config import load_config, root_dir
    from agent.cpu.view import render_table, summarize
    from agent.daemonconfig import DAEMON_SECTION

    cfg = load_config(args)
    d = cfg[DAEMON_SECTION]
    root = root_dir(args, cfg)
    if args.socket:
        pools, allocs, source = _from_socket(args.socket)
    else:
        pools, allocs, source = _from_checkpoint(root)
    try:
        numa = _numa_cpus(args.sysfs_root or d.sysfs_root, d.procfs_root)
    except OSError as e:
        raise CommandError(f"cannot read the NUMA layout: {e}") from None
    from agent.cpuset import CPUSet

    # CPUs this machine does not have (a checkpoint copied from elsewhere) show as node -1
    missing = CPUSet.union_all(a.cpus for a in allocs) - CPUSet.union_all(numa.values())
    if missing:
        numa[-1] = missing
    summary = summarize(numa, pools, allocs, source)
    print(_dumps(summary) if args.format == "json" else render_table(summary))
    return 0

