"""`hwagent launch`: admit a one-off pod from flags (or a manifest file) and say what it got.

``hwagent launch --name web --cpus 2 --qos dedicated --numa-binding --device example.com/gpu=1 -- cmd args``
builds the Pod manifest those flags mean (docs/admission.md) and sends it to
the daemon's admission API. Until a workload runtime runs in the daemon the
pod stays Pending ("Admitted"); a refusal exits 1 with the one-line reason.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from agent.cli import CommandError
from agent.commands._admission import add_common, call, container_line, dumps, format_pod_line, pod_dict

QOS_LEVELS = {"shared": "shared_cores", "dedicated": "dedicated_cores", "reclaimed": "reclaimed_cores",
              "system": "system_cores"}
QOS_KEY = "katalyst.kubewharf.io/qos_level"
ENHANCEMENT_KEY = "katalyst.kubewharf.io/memory_enhancement"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "launch",
        help="admit a pod from flags or a manifest file",
        description="Admit a pod through the running daemon: either from flags and the command after `--`, "
        "or from a Pod manifest (-f FILE, YAML or JSON). Prints what each container got.",
    )
    add_common(p)
    p.add_argument("-f", "--file", metavar="FILE", help="a Pod manifest (YAML or JSON; - for stdin)")
    p.add_argument("--name", help="pod name (DNS-1123 subdomain)")
    p.add_argument("--namespace", default="default")
    p.add_argument("--container", default="main", help="container name (default: main)")
    cpu = p.add_mutually_exclusive_group()
    cpu.add_argument("--cpus", metavar="N", type=int, help="whole CPUs (request = limit)")
    cpu.add_argument("--cpu-request", metavar="Q", help="a CPU request as a quantity (e.g. 500m), no limit")
    p.add_argument("--qos", choices=tuple(QOS_LEVELS), help="Katalyst QoS level (default: shared)")
    p.add_argument("--numa-binding", action="store_true",
                   help="bind the CPUs (and memory) to NUMA node(s); implied by --qos dedicated, "
                   "which the CPU policy serves only NUMA-bound")
    p.add_argument("--memory", metavar="SIZE", help="memory limit (= request), e.g. 2Gi")
    p.add_argument("--device", metavar="RESOURCE=COUNT", action="append", default=[],
                   help="extended resource count (repeatable)")
    p.add_argument("--ignore-unknown-fields", action="store_true",
                   help="-f: warn about unknown manifest fields instead of refusing them")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run")
    p.set_defaults(func=run)


def generated_name(command: str) -> str:
    """A pod name from the command, like ``systemd-run``'s unit names: ``stress-k3x9q``.

    Lower-cased, reduced to DNS-1123 label characters, with a random suffix so two
    launches of one command do not collide; ``--name`` picks a name instead.
    """
    import re
    import secrets
    import string

    base = re.sub(r"[^a-z0-9-]+", "-", os.path.basename(command).lower()).strip("-")[:40] or "pod"
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
    return f"{base}-{suffix}"


def manifest_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise CommandError("the command to run is missing: hwagent launch [--name N] [...] -- CMD ARGS")
    name = args.name or generated_name(cmd[0])
    annotations: dict[str, str] = {}
    if args.qos:
        annotations[QOS_KEY] = QOS_LEVELS[args.qos]
    if args.numa_binding or args.qos == "dedicated":
        annotations[ENHANCEMENT_KEY] = json.dumps({"numa_binding": "true"})
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if args.cpus is not None:
        if args.cpus <= 0:
            raise CommandError(f"--cpus must be at least 1, got {args.cpus}")
        limits["cpu"] = requests["cpu"] = str(args.cpus)
    if args.cpu_request is not None:
        requests["cpu"] = args.cpu_request
    if args.memory is not None:
        limits["memory"] = requests["memory"] = args.memory
    for item in args.device:
        resource, sep, count = item.partition("=")
        if not sep or not resource or not count.isdigit():
            raise CommandError(f"--device takes RESOURCE=COUNT (e.g. example.com/gpu=1), got {item!r}")
        limits[resource] = count
    container: dict[str, Any] = {"name": args.container, "command": cmd}
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    if resources:
        container["resources"] = resources
    meta: dict[str, Any] = {"name": name, "namespace": args.namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container]}}


def read_manifest(path: str) -> bytes:
    from agent.workloads.manifest import MAX_MANIFEST_BYTES

    try:
        if path == "-":
            return sys.stdin.buffer.read(MAX_MANIFEST_BYTES + 1)
        with open(Path(path), "rb") as f:
            return f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}") from None


def run(args: argparse.Namespace) -> int:
    from agent.api.admission.v1 import api_pb2 as pb

    if args.file:
        flags = [f for f in ("name", "cpus", "cpu_request", "qos", "memory") if getattr(args, f) is not None]
        if flags or args.device or args.numa_binding or [c for c in args.cmd if c != "--"]:
            raise CommandError("-f FILE takes the whole pod from the file; drop the other pod flags")
        raw = read_manifest(args.file)
    else:
        raw = json.dumps(manifest_from_flags(args)).encode()
    req = pb.AdmitRequest(manifest=raw, ignore_unknown_fields=args.ignore_unknown_fields)
    resp = call(args, lambda stub: stub.Admit(req, timeout=120))
    for w in resp.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.format == "json":
        print(dumps(pod_dict(resp.pod)))
        return 0
    print(f"admitted {format_pod_line(resp.pod)}")
    for c in resp.pod.containers:
        print(container_line(c))
    return 0
