"""Asking the running daemon over ``<root>/status.sock`` (for the CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["DaemonNotRunning", "get_status", "get_view"]


class DaemonNotRunning(Exception):
    """No daemon answers on the status socket (the message says what was found)."""


def _call(root_dir: str | Path, method: str, request: Any, timeout_s: float) -> Any:
    import grpc

    from agent.api.status.v1 import api_pb2_grpc as pb_grpc
    from agent.rootpaths import status_socket
    from agent.unixsock import dial

    sock = status_socket(Path(root_dir).absolute())
    if not sock.exists():
        raise DaemonNotRunning(f"no status socket at {sock}")
    with dial(sock, "status") as ch:
        try:
            return getattr(pb_grpc.DaemonStatusStub(ch), method)(request, timeout=timeout_s)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise DaemonNotRunning(f"nothing answers on {sock} ({e.code().name})") from None
            raise


def get_status(root_dir: str | Path, timeout_s: float = 5.0) -> Any:
    from agent.api.status.v1 import api_pb2 as pb

    return _call(root_dir, "GetStatus", pb.GetStatusRequest(), timeout_s)


def get_view(root_dir: str | Path, name: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """The named view from the live daemon; grpc.RpcError FAILED_PRECONDITION when it has no such part."""
    from agent.api.status.v1 import api_pb2 as pb

    return json.loads(_call(root_dir, "GetView", pb.GetViewRequest(name=name), timeout_s).json_document)
