"""`hwagent rm NAME...`: stop each pod if it runs, release its CPUs and devices, forget it."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from agent.cli import CommandError
from agent.commands._admission import add_common, call
from agent.commands._exitcodes import EXIT_NO_DAEMON


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("rm", help="remove admitted pods (releases their CPUs and devices)",
                              description="Remove pods: the runtime stops each first when it runs it, then its "
                              "CPUs and devices are released and it is forgotten. With several names each is "
                              "removed in turn; the exit status is the first failure's (the others still go).")
    add_common(p)
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--namespace", default="default")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agent.api.admission.v1 import api_pb2 as pb

    status = 0
    for name in args.names:
        req = pb.RemoveRequest(pod=pb.PodRef(name=name, namespace=args.namespace))
        try:
            pod = call(args, functools.partial(_remove, req), name).pod
        except CommandError as e:
            if e.code == EXIT_NO_DAEMON:
                raise
            print(f"hwagent rm: error: {e}", file=sys.stderr)
            status = status or e.code
            continue
        print(f"removed {pod.namespace}/{pod.name} uid={pod.uid}")
    return status


def _remove(req: Any, stub: Any) -> Any:
    return stub.Remove(req, timeout=600)
