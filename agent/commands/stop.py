"""`hwagent stop NAME... [--grace S]`: ask the workload runtime to stop pods (SIGTERM, grace, kill)."""

from __future__ import annotations

from agent.cli import CommandError
from agent.commands._admission import COMMON_FLAGS, call, format_pod_line, pod_path
from agent.commands._exitcodes import EXIT_NO_DAEMON
from agent.commands._flags import Flag, add, parse

#: typing is not imported at run time (~3 ms of the CLI's start-up); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import SimpleNamespace

#: stop's flags, defined once for argparse and the plain reader (agent.commands._flags)
FLAGS = (*COMMON_FLAGS, Flag("--namespace", default="default"),
         Flag("--grace", "-t", dest="grace", metavar="S", convert=float,
              help="grace period in seconds (-t as in docker stop)"))


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("stop", help="stop running pods (they stay listed; rm forgets them)",
                              description="Stop pods the runtime runs: SIGTERM, wait the grace period (the pod's "
                              "terminationGracePeriodSeconds unless --grace), then kill. Their CPUs and devices are "
                              "released; the records stay until `hwagent rm`. With several names each is stopped "
                              "in turn; the exit status is the first failure's (the others still go).")
    add(p, FLAGS[:2])
    p.add_argument("names", nargs="+", metavar="NAME")
    add(p, FLAGS[2:])
    p.set_defaults(func=run)


def fast_args(argv: Sequence[str]) -> SimpleNamespace | None:
    """``argv`` (after ``stop``) read without argparse, or None where argparse must read it (agent.cli)."""
    ns = parse(FLAGS, argv, positionals=("name",), func=run)
    if ns is not None:  # one name: argparse's nargs="+" list of it (several go through argparse)
        ns.names = [ns.__dict__.pop("name")]
    return ns


def run(args: argparse.Namespace) -> int:
    if args.grace is not None and not 0 <= args.grace <= 86400:
        raise CommandError(f"--grace must be in 0..86400 seconds, got {args.grace:g}")
    body = {} if args.grace is None else {"grace_seconds": args.grace}
    status = 0
    for name in args.names:
        try:
            pod = call(args, "POST", pod_path(args.namespace, name, "stop"), body, name=name,
                       timeout=max(600.0, (args.grace or 0) + 60))["pod"]
        except CommandError as e:
            if e.code == EXIT_NO_DAEMON or len(args.names) == 1:
                raise
            import sys

            print(f"hwagent stop: error: {e}", file=sys.stderr)
            status = status or e.code
            continue
        print(f"stopped {format_pod_line(pod)}")
    return status
