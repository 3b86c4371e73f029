"""The CLI side of the admission API (for the workload commands): find the daemon's socket, call, turn errors into one line.

Commands share this so each of them stays a thin argparse module. The socket
is found like the daemon finds it: ``--root-dir`` (or the config's root dir)
plus ``[workloads] socket_path``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from agent.cli import CommandError

__all__ = ["add_common", "call", "socket_path", "pod_dict", "format_pod_line", "EXIT_REFUSED"]

T = TypeVar("T")
#: exit status of a refused or failed call (argument errors stay 2)
EXIT_REFUSED = 1
CALL_TIMEOUT_S = 120.0


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="TOML config file (default: embedded defaults)")
    p.add_argument("--root-dir", metavar="DIR", help="the daemon's root dir (overrides the config)")


def socket_path(args: argparse.Namespace) -> Path:
    from agent.commands._config import load_config, root_dir
    from agent.rootpaths import admission_socket

    config = load_config(args)
    return admission_socket(root_dir(args, config), config["workloads"].socket_path)


def call(args: argparse.Namespace, fn: Callable[[Any], T]) -> T:
    """Run ``fn(stub)`` against the daemon; gRPC errors become CommandError (exit 1)."""
    import grpc

    from agent.api.admission.v1 import api_pb2_grpc as pb_grpc
    from agent.unixsock import dial

    path = socket_path(args)
    if not path.exists():
        raise CommandError(f"no hwagent admission socket at {path} (is `hwagent run` running with this root dir?)",
                           EXIT_REFUSED)
    with dial(path, "admission") as channel:
        try:
            return fn(pb_grpc.AdmissionStub(channel))
        except grpc.RpcError as e:
            code = e.code()
            details = e.details()
            if code == grpc.StatusCode.UNAVAILABLE and "connect" in (details or "").lower():
                raise CommandError(f"cannot connect to {path}: {details}", EXIT_REFUSED) from None
            raise CommandError(f"{code.name}: {details}", EXIT_REFUSED) from None


def _nodes(ids: Any) -> str:
    from agent.cpuset import CPUSet

    return str(CPUSet(int(i) for i in ids)) or "-"


def pod_dict(pod: Any) -> dict[str, Any]:
    """The JSON shape of ``hwagent ps --format json`` and ``describe --format json``."""
    return {
        "name": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
        "qos": pod.qos,
        "phase": pod.phase,
        "reason": pod.reason,
        "message": pod.message,
        "source": pod.source,
        "admitted_at": pod.admitted_at,
        "released": pod.released,
        "containers": [
            {
                "name": c.name,
                "kind": c.kind,
                "cpu_ids": list(c.cpu_ids),
                "mems": list(c.mems) if c.mems else None,
                "numa_affinity": None if c.any_node else list(c.numa_affinity),
                "devices": [{"resource": d.resource, "id": d.id, "numa_nodes": list(d.numa_nodes)} for d in c.devices],
                "state": c.state,
                "reason": c.reason,
                "restart_count": c.restart_count,
                "pid": c.pid or None,
                "exit_code": c.exit_code if c.HasField("exit_code") else None,
            }
            for c in pod.containers
        ],
        "events": [{"time": e.time, "message": e.message} for e in pod.events],
    }


def container_line(c: Any) -> str:
    aff = "any" if c.any_node else _nodes(c.numa_affinity)
    devs = ", ".join(f"{d.resource}={d.id}" + (f" (NUMA {_nodes(d.numa_nodes)})" if d.numa_nodes else "")
                     for d in c.devices)
    line = f"  {c.name}: cpus {_nodes(c.cpu_ids)}"
    if c.mems:
        line += f", memory nodes {_nodes(c.mems)}"
    line += f", NUMA affinity {aff}"
    if devs:
        line += f", devices {devs}"
    return line


def format_pod_line(pod: Any) -> str:
    return f"{pod.namespace}/{pod.name} uid={pod.uid} qos={pod.qos} phase={pod.phase}" + (
        f" ({pod.reason})" if pod.reason else ""
    )


def age(since: float, now: float | None = None) -> str:
    s = max(0, int((now or time.time()) - since))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)
