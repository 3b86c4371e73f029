"""`hwagent describe NAME`: one pod in full: spec, what each container got, status, events."""

from __future__ import annotations

import argparse
import json
import time

from agent.commands._admission import add_common, call, container_line, dumps, format_pod_line, pod_dict


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("describe", help="show one admitted pod in full",
                              description="Show one pod: its spec, CPUs, memory nodes, NUMA affinity, devices "
                              "and device grants per container, its status and its events.")
    add_common(p)
    p.add_argument("name")
    p.add_argument("--namespace", default="default")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agent.api.admission.v1 import api_pb2 as pb

    ref = pb.PodRef(name=args.name, namespace=args.namespace)
    pod = call(args, lambda stub: stub.Get(pb.GetRequest(pod=ref), timeout=30)).pod
    record = json.loads(pod.record_json)
    if args.format == "json":
        print(dumps({**pod_dict(pod), "record": record}))
        return 0
    spec = record["pod"]["spec"]
    print(format_pod_line(pod))
    if pod.message:
        print(f"message: {pod.message}")
    print(f"source: {pod.source}   admitted: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(pod.admitted_at))}"
          f"   resources released: {'yes' if pod.released else 'no'}")
    for k, v in sorted(spec["annotations"].items()):
        print(f"annotation: {k}={v}")
    print(f"restart policy: {spec['restart_policy']}   grace period: {spec['termination_grace_period_s']}s")
    grants = {a["name"]: a["grant"] for a in record["pod"]["assignments"]}
    containers = {c["name"]: c for c in spec["init_containers"] + spec["containers"]}
    print("containers:")
    for c in pod.containers:
        cs = containers.get(c.name, {})
        print(container_line(c))
        print(f"    {c.kind} command: {' '.join(cs.get('command', []) + cs.get('args', []))}")
        if c.state:
            extra = f" exit {c.exit_code}" if c.HasField("exit_code") else ""
            print(f"    state: {c.state}{' (' + c.reason + ')' if c.reason else ''}{extra} restarts={c.restart_count}")
        g = grants.get(c.name) or {}
        for k, v in sorted((g.get("envs") or {}).items()):
            print(f"    device env: {k}={v}")
        for cpath, hpath, perms in g.get("devices") or []:
            print(f"    device node: {hpath} -> {cpath} ({perms})")
        for cpath, hpath, ro in g.get("mounts") or []:
            print(f"    device mount: {hpath} -> {cpath}{' (ro)' if ro else ''}")
        for name in g.get("cdi_devices") or []:
            print(f"    CDI device: {name}")
    print("events:")
    for e in pod.events:
        print(f"  {time.strftime('%H:%M:%S', time.gmtime(e.time))}  {e.message}")
    return 0
