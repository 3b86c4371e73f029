"""`hwagent status`, `cpus`, `memory` and `resources` ask the daemon's root-only HTTP/JSON status
socket (agent.status.httpapi) and print what they printed over gRPC, byte for byte (issue 37 item 16).

The CLI's outputs are compared between the two transports of one running daemon: first over
``status-http.sock``, then with that socket's file gone, as a daemon from before it has none,
over gRPC's ``status.sock``; ``status``'s uptime moves between calls and is masked.
"""

from __future__ import annotations

import re
import socket

import pytest

from agent.cli import main
from agent.rootpaths import status_http_socket, status_socket
from agent.status.client import DaemonNotRunning, StatusError, ask_status, ask_view, get_status, get_view
from agent.status.document import status_document
from agent.status.httpapi import allowed, route
from agent.workloads.http11 import HttpError, Request
from agent.workloads.users import Caller

from . import fake_components as fc
from .test_daemon import M, make_daemon, run_daemon

STATUS = "agent.status.component:factory"
HOST = "agent.devicemanager.component:factory"
READS = [(c, *f) for c in ("status", "resources", "cpus", "memory") for f in ((), ("--format", "json"))]
_UPTIME = re.compile(r'(up: \d+s|"uptime_seconds": [0-9.e"+-]+)')


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, _UPTIME.sub("UPTIME", out.out), out.err


def test_the_cli_prints_the_same_over_http_as_over_grpc(tmp_path, capsys):
    root = str(tmp_path / "root")
    d = make_daemon(tmp_path, (HOST, f"{M}:alpha", STATUS))

    def ask(d):
        fc.HEALTH["alpha"] = False
        assert status_http_socket(root).is_socket()
        over_http = {argv: _cli(capsys, argv[0], "--root-dir", root, *argv[1:]) for argv in READS}
        docs = ask_status(root), get_status(root), ask_view(root, "resources"), get_view(root, "resources")
        with pytest.raises(StatusError) as unknown:
            ask_view(root, "nope")
        with pytest.raises(StatusError) as no_cpu:
            ask_view(root, "cpus")
        status_http_socket(root).unlink()  # a daemon from before the HTTP socket: asked over gRPC
        over_grpc = {argv: _cli(capsys, argv[0], "--root-dir", root, *argv[1:]) for argv in READS}
        return over_http, over_grpc, docs, unknown.value, no_cpu.value

    exit_code, (over_http, over_grpc, docs, unknown, no_cpu) = run_daemon(d, ask)
    assert exit_code == 0
    assert over_http == over_grpc
    code, out, _ = over_http[("status",)]
    assert code == 0 and "alpha" in out and "UNHEALTHY" in out
    assert over_http[("resources",)][0] == 0 and over_http[("memory",)][0] != 0
    http_status, grpc_status, http_res, grpc_res = docs
    grpc_doc = status_document(grpc_status)
    assert {k: v for k, v in http_status.items() if k != "uptime_seconds"} == \
        {k: v for k, v in grpc_doc.items() if k != "uptime_seconds"}
    assert list(http_res) == list(grpc_res) and http_res == grpc_res
    assert unknown.code == "INVALID_ARGUMENT" and no_cpu.code == "FAILED_PRECONDITION"
    assert "CPU policy does not run" in no_cpu.message


def test_not_running_only_when_nothing_answers(tmp_path, capsys):
    """Stale sockets of a daemon that died (files left, nobody listening) are not a running daemon."""
    root = tmp_path / "root"
    root.mkdir()
    for path in (status_socket(root), status_http_socket(root)):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        s.close()
    with pytest.raises(DaemonNotRunning):
        ask_status(root)
    code, _out, err = _cli(capsys, "status", "--root-dir", str(root))
    assert code != 0 and "hwagent is not running with root dir" in err and "nothing answers" in err
    code, _out, err = _cli(capsys, "memory", "--root-dir", str(root))
    assert code != 0 and "no running daemon to ask" in err


def test_only_root_or_the_daemons_own_user_is_answered():
    assert allowed(Caller(0, 0), 0) and not allowed(Caller(1000, 1000, (0,)), 0)
    assert allowed(Caller(1000, 1000), 1000)  # a daemon run unprivileged (tests): its own user owns the 0600 socket


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", "/v1/status", None), ("GET", "/v1/views/cpus", None), ("POST", "/v1/status", 405),
    ("GET", "/v1/pods", 404), ("GET", "/v1/views", 404), ("DELETE", "/v1/views/cpus", 405),
])
def test_routes(method, path, status):
    req = Request(method, tuple(p for p in path.split("/") if p), {}, {})
    if status is None:
        assert route(req)[0] in ("status", "view")
    else:
        with pytest.raises(HttpError) as e:
            route(req)
        assert e.value.status == status
