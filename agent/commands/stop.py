"""`hwagent stop NAME [--grace S]`: ask the workload runtime to stop a pod (SIGTERM, grace, kill)."""

from __future__ import annotations

from agent.cli import CommandError
from agent.commands._admission import COMMON_FLAGS, call, format_pod_line, pod_path
from agent.commands._flags import Flag, add, parse

#: typing is not imported at run time (~3 ms of the CLI's start-up); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import SimpleNamespace

#: stop's flags, defined once for argparse and the plain reader (agent.commands._flags)
FLAGS = (*COMMON_FLAGS, Flag("--namespace", default="default"),
         Flag("--grace", metavar="S", convert=float, help="grace period in seconds"))


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("stop", help="stop a running pod (it stays listed; rm forgets it)",
                              description="Stop a pod the runtime runs: SIGTERM, wait the grace period (the pod's "
                              "terminationGracePeriodSeconds unless --grace), then kill. Its CPUs and devices are "
                              "released; the record stays until `hwagent rm`.")
    add(p, FLAGS[:2])
    p.add_argument("name")
    add(p, FLAGS[2:])
    p.set_defaults(func=run)


def fast_args(argv: Sequence[str]) -> SimpleNamespace | None:
    """``argv`` (after ``stop``) read without argparse, or None where argparse must read it (agent.cli)."""
    return parse(FLAGS, argv, positionals=("name",), func=run)


def run(args: argparse.Namespace) -> int:
    if args.grace is not None and not 0 <= args.grace <= 86400:
        raise CommandError(f"--grace must be in 0..86400 seconds, got {args.grace:g}")
    body = {} if args.grace is None else {"grace_seconds": args.grace}
    pod = call(args, "POST", pod_path(args.namespace, args.name, "stop"), body, name=args.name,
               timeout=max(600.0, (args.grace or 0) + 60))["pod"]
    print(f"stopped {format_pod_line(pod)}")
    return 0
