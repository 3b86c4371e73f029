"""``<root>/status-http.sock``: the status service's answers as HTTP/1.1 + JSON, for root alone.

Why a second socket: `hwagent status`, `cpus`, `memory` and `resources` spent most of their
CPU importing grpc and the generated protobuf modules to ask ``status.sock`` (three times a
`hwagent ps`, which speaks HTTP/JSON with the standard library: issue 37 item 16). gRPC and a
plain HTTP server cannot share one listening socket, so the answers are served twice, from the
same code (``StatusComponent.status`` and ``view``); programs keep the gRPC service.

The answers name every user's pods, CPUs, devices and memory, so this socket is root's as
``status.sock`` is: mode 0600, owned by the daemon (root), and each connection's caller, as the
kernel names it (SO_PEERCRED), must be root (or the daemon's own user, for a daemon run
unprivileged in a test): a socket an admin loosened (chmod 0666) still tells anyone else 403
and nothing more.

    GET /v1/status          the status document (agent.status.document)
    GET /v1/views/NAME      the view NAME (resources, cpus, memory, health), as GetView's json_document:
                            400 FAILED_PRECONDITION when its part does not run here,
                            404 INVALID_ARGUMENT for a name that is no view
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.eventlog import get_logger
from agent.workloads.http11 import MAX_HEAD, READ_TIMEOUT_S, HttpError, Request, Response, serve_connection
from agent.workloads.peerfront import PeerSocketServer
from agent.workloads.users import Caller

__all__ = ["StatusHttpApi", "route", "allowed", "VIEWS"]

log = get_logger("hwagent.status")

VIEWS = ("resources", "cpus", "memory", "health")


def allowed(caller: Caller, daemon_uid: int) -> bool:
    """Root, or the daemon's own user (pure): the only callers the status may be shown to."""
    return caller.uid in (0, daemon_uid)


def route(req: Request) -> tuple[str, str]:
    """("status", "") or ("view", NAME) for a request (pure); HttpError for anything else."""
    p = req.parts
    if p == ("v1", "status") or (len(p) == 3 and p[:2] == ("v1", "views")):
        if req.method != "GET":
            raise HttpError(405, f"{req.method} is not allowed on /{'/'.join(p)} (only GET)", "UNIMPLEMENTED")
        return ("status", "") if len(p) == 2 else ("view", p[2])
    raise HttpError(404, f"no such route {req.method} /{'/'.join(p)}; this API serves GET /v1/status, "
                    f"GET /v1/views/{{{','.join(VIEWS)}}}", "UNIMPLEMENTED")


class StatusHttpApi(PeerSocketServer):
    """Serve ``status()`` (the status document) and ``view(name)`` (a view's dict; KeyError for an
    unknown name, agent.status.views.ViewUnavailable for a part not running) on ``path``, root only."""

    def __init__(self, path: Path, status: Callable[[], dict[str, Any]], view: Callable[[str], dict[str, Any]],
                 *, idle_s: float = READ_TIMEOUT_S) -> None:
        super().__init__(path, mode=0o600, gid=None, limit=MAX_HEAD, idle_s=idle_s)
        self._status, self._view = status, view
        self._uid = os.geteuid()

    async def handle(self, req: Request, caller: Caller) -> Response:
        from agent.status.views import ViewUnavailable

        try:
            if not allowed(caller, self._uid):
                raise HttpError(403, "only root may read the daemon's status: it names every user's pods",
                                "PERMISSION_DENIED")
            what, name = route(req)
            if what == "status":
                return Response(200, raw=json.dumps(self._status()).encode())
            try:
                doc = self._view(name)
            except KeyError:
                raise HttpError(404, f"unknown view {name!r} (known: {', '.join(VIEWS)})") from None
            except ViewUnavailable as e:
                raise HttpError(400, str(e), "FAILED_PRECONDITION") from None
            return Response(200, raw=json.dumps(doc, sort_keys=True, default=str).encode())
        except HttpError as e:
            return Response(e.status, {"code": e.code, "message": e.message})
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a view that breaks is our bug: a clear 500, never a traceback
            log.exception("status http failed", path="/".join(req.parts))
            return Response(500, {"code": "INTERNAL", "message": f"{type(e).__name__}: {e}"})

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, caller: Caller) -> None:
        await serve_connection(reader, writer, lambda req: self.handle(req, caller), 0, self.idle_s)
