"""The CLI's API: HTTP/1.1 and JSON on ``<root>/cli.sock``, beside the gRPC admission API.

Why a second protocol: a `hwagent ps` spent more CPU importing grpc and the
generated protobuf modules than the daemon spent answering it (bench/cli.py,
docs/performance.md). The CLI now speaks HTTP/JSON with the standard library
(``agent.commands._admission``), as docker's and podman's CLIs do on their unix
sockets; programs keep the gRPC admission API, which is unchanged.

Both APIs are one set of rules: each route calls the gRPC servicer's own method
(``AdmissionServicer``, without its gRPC error wrapper) with the caller the
kernel names for the connection (SO_PEERCRED/SO_PEERGROUPS, ``peer_caller``),
and answers the message as JSON (``agent.workloads.podjson``). An
``AdmissionError`` becomes an HTTP status with ``{"code", "message"}``, the code
the gRPC status's name. The socket has the admission socket's mode and group.

    GET    /v1/directory                     the workloads other fronts name (Slurm's jobs), the caller's own
                                             unless root: {"source": S, "containers": [...]}
    GET    /v1/pods[?limit=N][&continue=T]   List    {"pods": [...], "manifest_errors": [...], "continue": T}
                                             (the summary form: no events, no record; limit 0 or
                                             none: every pod; "continue" empty on the last page)
           [&lines=1]                        the same page as lines (``list_lines``): first
                                             {"continue", "count", "manifest_errors"}, then each
                                             pod's JSON (sorted keys), ",\n" between them: what
                                             `ps --format json` prints, encoded here once
    GET    /v1/pods/NS/NAME[?wait=terminal&timeout=S][&summary=1]
                                             Get     {"pod": {..., "record": {...}, "cgroup": ...}}
                                             (wait: answer once the pod is terminal, or after
                                             S seconds (default 60, at most 3600) as it is then;
                                             summary: List's form, no events, record, cgroups
                                             or pids, as `launch --wait` asks)
    POST   /v1/pods[?dry_run=1][&ignore_unknown_fields=1]
                                             Admit   body: the manifest (YAML or JSON)
    POST   /v1/pods/NS/NAME/stop             Stop    body: {} or {"grace_seconds": S}
    POST   /v1/pods/NS/NAME/signal           Signal  body: {"signal": "TERM"[, "container": C]}
                                             {"pod": {...}, "signal": "SIGTERM",
                                              "containers": [{"name": C, "pids": [...]}]}
    DELETE /v1/pods/NS/NAME                  Remove  {"pod": {...}}
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent.api.admission.v1 import api_pb2 as pb
from agent.eventlog import get_logger
from agent.workloads.errors import AdmissionError
from agent.workloads.connlimit import ConnectionLimiter
from agent.workloads.http11 import MAX_HEAD, READ_TIMEOUT_S, HttpError, Request, Response, render, serve_connection
from agent.workloads.peerfront import PeerSocketServer
from agent.workloads.podjson import admit_json, pod_json
from agent.workloads.server import AdmissionServicer
from agent.workloads.users import Caller

__all__ = ["CliApi", "route", "HTTP_STATUS"]

log = get_logger("hwagent.workloads")

#: an AdmissionError's code -> the HTTP status it answers with
HTTP_STATUS = {
    "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "PERMISSION_DENIED": 403, "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409, "ABORTED": 409, "RESOURCE_EXHAUSTED": 429, "INTERNAL": 500, "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}
_ROUTES = ("GET /v1/pods, GET|DELETE /v1/pods/NS/NAME, POST /v1/pods, POST /v1/pods/NS/NAME/stop, "
           "POST /v1/pods/NS/NAME/signal")
_ACTIONS = ("stop", "signal")
#: a long-poll Get's wait when the request names none (the CLI asks again after it)
DEFAULT_WAIT_S = 60.0


def _flag(req: Request, name: str) -> bool:
    value = req.query.get(name, "0").lower()
    if value in ("", "1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    raise HttpError(400, f"query parameter {name} takes 1 or 0, got {value[:16]!r}")


def _limit(req: Request) -> int:
    value = req.query.get("limit", "0")
    if not value.isdigit() or len(value) > 9:
        raise HttpError(400, f"query parameter limit takes a count of pods (0: every pod), got {value[:16]!r}")
    return int(value)


def _grace(req: Request) -> float | None:
    body = req.json()
    unknown = sorted(set(body) - {"grace_seconds"})
    if unknown:
        raise HttpError(400, f"unknown field(s) {', '.join(unknown)} in the stop request (it takes grace_seconds)")
    grace = body.get("grace_seconds")
    if grace is None:
        return None
    if isinstance(grace, bool) or not isinstance(grace, int | float):
        raise HttpError(400, f"grace_seconds must be a number of seconds, got {grace!r}")
    return float(grace)


def _signal(req: Request, ref: pb.PodRef) -> pb.SignalRequest:
    body = req.json()
    unknown = sorted(set(body) - {"signal", "container"})
    if unknown:
        raise HttpError(400, f"unknown field(s) {', '.join(unknown)} in the signal request "
                        "(it takes signal and container)")
    sig, container = body.get("signal"), body.get("container", "")
    if isinstance(sig, int) and not isinstance(sig, bool):
        sig = str(sig)
    if not isinstance(sig, str) or not sig:
        raise HttpError(400, f"signal must be a name (TERM) or a number (15), got {sig!r}")
    if not isinstance(container, str):
        raise HttpError(400, f"container must be a container's name, got {container!r}")
    return pb.SignalRequest(pod=ref, signal=sig, container=container)


def _wait(req: Request) -> float | None:
    """``?wait=terminal[&timeout=S]``: the seconds a Get may wait for the pod to end; None: no wait."""
    wait = req.query.get("wait")
    if wait is None:
        if "timeout" in req.query:
            raise HttpError(400, "query parameter timeout needs wait=terminal")
        return None
    if wait != "terminal":
        raise HttpError(400, f"query parameter wait takes 'terminal' (answer once the pod ended), got {wait[:16]!r}")
    text = req.query.get("timeout", "")
    if not text:
        return DEFAULT_WAIT_S
    try:
        timeout = float(text)
    except ValueError:
        timeout = -1.0
    if not 0 <= timeout <= 3600:
        raise HttpError(400, f"query parameter timeout takes seconds in 0..3600, got {text[:16]!r}")
    return timeout


def route(req: Request) -> tuple[str, Any]:
    """The servicer method a request names and the request message for it (pure); HttpError
    (404, 405, 400) for a path, method or body this API does not take."""
    p = req.parts
    if p[:2] != ("v1", "pods") or len(p) not in (2, 4, 5) or (len(p) == 5 and p[4] not in _ACTIONS):
        raise HttpError(404, f"no such route {req.method} /{'/'.join(p)}; this API serves {_ROUTES}",
                        "UNIMPLEMENTED")
    allowed = {2: ("GET", "POST"), 4: ("GET", "DELETE"), 5: ("POST",)}[len(p)]
    if req.method not in allowed:
        raise HttpError(405, f"{req.method} is not allowed on /{'/'.join(p)} (only {', '.join(allowed)})",
                        "UNIMPLEMENTED")
    if len(p) == 2:
        if req.method == "GET":
            return "List", pb.ListRequest(limit=_limit(req), page_token=req.query.get("continue", ""), summary=True)
        return "Admit", pb.AdmitRequest(manifest=req.body, dry_run=_flag(req, "dry_run"),
                                        ignore_unknown_fields=_flag(req, "ignore_unknown_fields"))
    ref = pb.PodRef(namespace=p[2], name=p[3])
    if len(p) == 5 and p[4] == "signal":
        return "Signal", _signal(req, ref)
    if len(p) == 5:
        stop = pb.StopRequest(pod=ref)
        grace = _grace(req)
        if grace is not None:
            stop.grace_seconds = grace
        return "Stop", stop
    if req.method == "GET":
        get = pb.GetRequest(pod=ref, summary=_flag(req, "summary"))
        wait = _wait(req)
        if wait is not None:
            get.wait_terminal_seconds = wait
        return "Get", get
    return "Remove", pb.RemoveRequest(pod=ref)


def answer(method: str, resp: Any, summary: bool = False) -> dict[str, Any]:
    """A servicer's reply message as the JSON body the CLI reads (``summary``: a Get asked for
    List's form)."""
    if method == "List":
        return {"pods": [pod_json(p) for p in resp.pods],
                "manifest_errors": [{"path": e.path, "error": e.error} for e in resp.manifest_errors],
                "continue": resp.next_page_token}
    if method == "Admit":
        return admit_json(resp)
    if method == "Signal":
        return {"pod": pod_json(resp.pod), "signal": resp.signal,
                "containers": [{"name": c.name, "pids": list(c.pids)} for c in resp.containers]}
    return {"pod": pod_json(resp.pod, record=method == "Get" and not summary)}


#: one pod's JSON as `ps --format json` prints it: sorted keys, json's default separators, one line
_POD_LINE = json.JSONEncoder(sort_keys=True).encode


def list_lines(pods: Sequence[dict[str, Any]], errors: Sequence[tuple[str, str]], next_token: str) -> bytes:
    """A List page as ``?lines=1`` answers it: a first line ``{"continue": T, "count": N,
    "manifest_errors": [...]}``, then the N pods' JSON joined by ``",\n"`` (no newline inside one:
    JSON escapes them; ``pod_lines``). The CLI writes the pods through as they come, neither
    decoding nor encoding them (issue 37 item 17: 5,000 pods cost 1.5 s of a client's CPU, most of
    it re-encoding). ``pods`` are consumed (``pod_lines``)."""
    head = json.dumps({"continue": next_token, "count": len(pods),
                       "manifest_errors": [{"error": e, "path": p} for p, e in errors]}, sort_keys=True)
    return (head + "\n" + pod_lines(pods)).encode()


def pod_lines(pods: Sequence[dict[str, Any]]) -> str:
    """``",\n".join(_POD_LINE(p) for p in pods)``, each distinct list of CPU ids encoded once.

    The pods of a shared pool hold the same list object (agent.workloads.server.summary_json) of
    up to a machine's CPUs: on 256 CPUs those ids were two thirds of a listing's bytes and most of
    its encoding. Each such list is put in its pods as a marker string (a NUL, a nonce drawn for
    this call, its number: no string of a pod can be one, as JSON escapes NUL and nobody knows
    the nonce), the pods encoded, and every marker replaced by its list's encoding in one pass.
    The pods' container dicts are changed (their ``cpu_ids``): they are the caller's to drop."""
    import re
    import secrets

    nonce = secrets.token_hex(8)
    marks: dict[int, str] = {}
    encoded: list[str] = []
    for pod in pods:
        for c in pod["containers"]:
            ids = c["cpu_ids"]
            if len(ids) < 8:
                continue  # a few ids: as cheap to encode in place
            mark = marks.get(id(ids))
            if mark is None:
                mark = marks[id(ids)] = f"\0{nonce}:{len(encoded)}"
                encoded.append(json.dumps(ids))
            c["cpu_ids"] = mark
    text = ",\n".join([_POD_LINE(p) for p in pods])
    if not encoded:
        return text
    return re.sub(f'"\\\\u0000{nonce}:([0-9]+)"', lambda m: encoded[int(m.group(1))], text)


class CliApi(PeerSocketServer):
    """Serve the CLI API on ``path`` (mode ``mode``, group ``gid`` when not None) over ``workloads``."""

    def __init__(self, path: Path, workloads: Any, manifest_errors: Callable[[], Sequence[tuple[str, str]]],
                 *, max_body: int, mode: int = 0o600, gid: int | None = None,
                 limiter: ConnectionLimiter | None = None, idle_s: float = READ_TIMEOUT_S,
                 directory: Callable[[], Any] | None = None) -> None:
        """``directory``: the pod directory's source when a front publishes one (``POD_DIRECTORY``,
        deferred: the fronts start after admission), for ``GET /v1/directory``."""
        super().__init__(path, mode=mode, gid=gid, limit=MAX_HEAD, limiter=limiter, cost=1, idle_s=idle_s)
        self.directory = directory
        self.max_body = max_body
        # the caller is passed where the gRPC servicer gets its context: it is the caller
        self.servicer = AdmissionServicer(workloads, manifest_errors, caller_of=lambda caller: caller)

    async def handle(self, req: Request, caller: Caller) -> Response:
        if req.parts == ("v1", "directory"):
            return self._directory(req, caller)
        try:
            method, message = route(req)
            # the servicer's method as written, without the wrapper that turns errors into gRPC aborts
            fn = getattr(AdmissionServicer, method).__wrapped__
            summary = method == "Get" and message.summary
            if method == "List" and _flag(req, "lines"):
                recs, errors, next_token = self.servicer.list_page(message, caller)
                return Response(200, raw=list_lines([self.servicer.summary_json(r) for r in recs], errors, next_token))
            return Response(200, answer(method, await fn(self.servicer, message, caller), summary))
        except HttpError as e:
            return Response(e.status, {"code": e.code, "message": e.message})
        except AdmissionError as e:
            return Response(HTTP_STATUS.get(e.code, 500), {"code": e.code, "message": e.message})
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a clear 500, never a traceback to the client
            log.exception("cli api failed", method=req.method, path="/".join(req.parts))
            return Response(500, {"code": "INTERNAL", "message": f"{type(e).__name__}: {e}"})

    def _directory(self, req: Request, caller: Caller) -> Response:
        """The workloads other fronts name (Slurm's jobs), as far as ``caller`` may see them
        (agent.workloads.directoryview); empty where no front publishes a directory."""
        from agent.workloads.directoryview import visible_entries

        if req.method != "GET":
            return Response(405, {"code": "UNIMPLEMENTED", "message": f"{req.method} is not allowed on /v1/directory "
                                  "(only GET)"})
        source = self.directory() if self.directory is not None else None
        return Response(200, visible_entries(source.current if source is not None else None, caller.uid))

    def refusal(self, why: str) -> bytes:
        """A connection over its caller's cap is answered ``429`` with the reason, then closed."""
        return render(Response(429, {"code": "RESOURCE_EXHAUSTED", "message": why}), False)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, caller: Caller) -> None:
        await serve_connection(reader, writer, lambda req: self.handle(req, caller), self.max_body, self.idle_s)
