"""`hwagent rm NAME...`: stop each pod if it runs, release its CPUs and devices, remove its logs, forget it."""

from __future__ import annotations

import argparse
import sys

from agent.cli import CommandError
from agent.commands._admission import Session, add_common, pod_path
from agent.commands._exitcodes import EXIT_NO_DAEMON


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("rm", help="remove admitted pods (releases their CPUs and devices)",
                              description="Remove pods: the runtime stops each first when it runs it, then its "
                              "CPUs and devices are released, its logs are removed (as docker rm does) and it is "
                              "forgotten. With several names each is removed in turn; the exit status is the "
                              "first failure's (the others still go).")
    add_common(p)
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--namespace", default="default")
    p.add_argument("-f", "--force", action="store_true",
                   help="taken for docker's habit: rm always stops a running pod first")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    status = 0
    with Session(args) as session:
        for name in args.names:
            session.name = name
            try:
                pod = session.request("DELETE", pod_path(args.namespace, name), timeout=600)["pod"]
            except CommandError as e:
                if e.code == EXIT_NO_DAEMON:
                    raise
                print(f"hwagent rm: error: {e}", file=sys.stderr)
                status = status or e.code
                continue
            print(f"removed {pod['namespace']}/{pod['name']} uid={pod['uid']}")
    return status
