"""`hwagent stop NAME [--grace S]`: ask the workload runtime to stop a pod (SIGTERM, grace, kill)."""

from __future__ import annotations

import argparse

from agent.cli import CommandError
from agent.commands._admission import add_common, call, format_pod_line, pod_path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("stop", help="stop a running pod (it stays listed; rm forgets it)",
                              description="Stop a pod the runtime runs: SIGTERM, wait the grace period (the pod's "
                              "terminationGracePeriodSeconds unless --grace), then kill. Its CPUs and devices are "
                              "released; the record stays until `hwagent rm`.")
    add_common(p)
    p.add_argument("name")
    p.add_argument("--namespace", default="default")
    p.add_argument("--grace", metavar="S", type=float, help="grace period in seconds")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.grace is not None and not 0 <= args.grace <= 86400:
        raise CommandError(f"--grace must be in 0..86400 seconds, got {args.grace:g}")
    body = {} if args.grace is None else {"grace_seconds": args.grace}
    pod = call(args, "POST", pod_path(args.namespace, args.name, "stop"), body, name=args.name,
               timeout=max(600.0, (args.grace or 0) + 60))["pod"]
    print(f"stopped {format_pod_line(pod)}")
    return 0
