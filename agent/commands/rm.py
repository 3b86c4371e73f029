"""`hwagent rm NAME`: stop the pod if it runs, release its CPUs and devices, forget it."""

from __future__ import annotations

import argparse

from agent.commands._admission import add_common, call


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("rm", help="remove an admitted pod (releases its CPUs and devices)",
                              description="Remove a pod: the runtime stops it first when it runs it, then its "
                              "CPUs and devices are released and it is forgotten.")
    add_common(p)
    p.add_argument("name")
    p.add_argument("--namespace", default="default")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agent.api.admission.v1 import api_pb2 as pb

    ref = pb.PodRef(name=args.name, namespace=args.namespace)
    pod = call(args, lambda stub: stub.Remove(pb.RemoveRequest(pod=ref), timeout=600)).pod
    print(f"removed {pod.namespace}/{pod.name} uid={pod.uid}")
    return 0
