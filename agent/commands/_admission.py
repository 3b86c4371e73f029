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

from agent.workloads.config import WORKLOADS_SECTION
from agent.cli import CommandError
from agent.commands._exitcodes import EXIT_EXISTS, EXIT_NO_DAEMON, EXIT_NOT_FOUND, EXIT_REFUSED

__all__ = ["add_common", "call", "Session", "error_for", "socket_path", "pod_dict", "format_pod_line",
           "EXIT_REFUSED"]

T = TypeVar("T")
CALL_TIMEOUT_S = 120.0


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="TOML config file (default: embedded defaults)")
    p.add_argument("--root-dir", metavar="DIR", help="the daemon's root dir (overrides the config)")


def socket_path(args: argparse.Namespace) -> Path:
    from agent.commands._config import load_config, root_dir
    from agent.rootpaths import admission_socket

    config = load_config(args)
    return admission_socket(root_dir(args, config), config[WORKLOADS_SECTION].socket_path)


def daemon_down(path: Path) -> CommandError:
    return CommandError(f"the daemon is not running (no answer on {path}); start it with `hwagent run` "
                        "(or `systemctl start hwagent`)", EXIT_NO_DAEMON)


def error_for(code: str, details: str, path: Path, name: str | None = None) -> CommandError:
    """A gRPC status as one line that says what happened and what to type next, and its exit
    status (agent.commands._exitcodes); the status's code name is never shown."""
    details = details or code.lower().replace("_", " ")
    if code == "UNAVAILABLE":
        low = details.lower()
        if "connect" in low or "refused" in low or "no such file" in low:
            return daemon_down(path)
        return CommandError(f"the daemon stopped answering ({details}); check it with `hwagent status`",
                            EXIT_NO_DAEMON)
    if code == "NOT_FOUND":
        return CommandError(f"{details}; `hwagent ps` lists the pods", EXIT_NOT_FOUND)
    if code == "ALREADY_EXISTS":
        rm = f"`hwagent rm {name}`" if name else "`hwagent rm NAME`"
        return CommandError(f"{details}; remove it first with {rm}, or choose another name", EXIT_EXISTS)
    if code == "INVALID_ARGUMENT" and "unknown field" in details:
        return CommandError(f"{details}; to admit it anyway, with unknown fields ignored and warned about, add "
                            "--ignore-unknown-fields", EXIT_REFUSED)
    if code == "DEADLINE_EXCEEDED":
        return CommandError(f"the daemon did not answer in time ({details}); it may be busy: "
                            "check it with `hwagent status`", EXIT_REFUSED)
    return CommandError(details, EXIT_REFUSED)


class Session:
    """One channel to the daemon's admission API for several calls (``launch --wait`` polls
    on it); ``session(fn)`` runs ``fn(stub)`` with gRPC errors turned into ``error_for``'s."""

    def __init__(self, args: argparse.Namespace, name: str | None = None) -> None:
        self.path = socket_path(args)
        self.name = name
        self._channel: Any = None
        self.stub: Any = None

    def __enter__(self) -> Session:
        from agent.api.admission.v1 import api_pb2_grpc as pb_grpc
        from agent.unixsock import dial

        if not self.path.exists():
            raise daemon_down(self.path)
        self._channel = dial(self.path, "admission")
        self.stub = pb_grpc.AdmissionStub(self._channel.__enter__())
        return self

    def __exit__(self, *exc: object) -> None:
        self._channel.__exit__(*exc)

    def __call__(self, fn: Callable[[Any], T]) -> T:
        import grpc

        try:
            return fn(self.stub)
        except grpc.RpcError as e:
            raise error_for(e.code().name, e.details() or "", self.path, self.name) from None


def call(args: argparse.Namespace, fn: Callable[[Any], T], name: str | None = None) -> T:
    """Run ``fn(stub)`` against the daemon; gRPC errors become CommandError (``error_for``).
    ``name``: the pod the call is about, for the next command a refusal suggests."""
    with Session(args, name) as session:
        return session(fn)


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
