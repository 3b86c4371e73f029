"""The CLI's HTTP/JSON API (``<root>/cli.sock``) on a real `hwagent run`: every route, the
admission errors as HTTP statuses, and bad input refused with 4xx while nothing changes."""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.integration.workloads.test_daemon import node  # noqa: F401 - the fixture

MANIFEST = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "main", "command": ["/bin/true"],
                                     "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]}}


class _Conn(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=60)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(str(self.unix_path))


def _call(path: Path, method: str, target: str, body: bytes | None = None) -> tuple[int, dict[str, Any]]:
    conn = _Conn(path)
    try:
        conn.request(method, target, body=body)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def _raw(path: Path, data: bytes, half_close: bool = False) -> tuple[int, dict[str, Any]]:
    """Send ``data`` as it is (``half_close``: then end the sending side) and read the one answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(str(path))
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        got = b""
        while b"\r\n\r\n" not in got and (chunk := s.recv(65536)):
            got += chunk
        head, _, body = got.partition(b"\r\n\r\n")
        length = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.startswith(b"Content-Length")))
        while len(body) < length and (chunk := s.recv(65536)):
            body += chunk
    return int(head.split(b" ", 2)[1]), json.loads(body)


def _names(sock: Path) -> list[str]:
    status, body = _call(sock, "GET", "/v1/pods")
    assert status == 200, body
    return [p["name"] for p in body["pods"]]


@pytest.mark.slow
def test_every_route_and_admission_errors_as_http_statuses(node):  # noqa: F811
    d = node.start()
    sock = node.root / "cli.sock"
    assert sock.is_socket()
    cli_st, adm_st = os.stat(sock), os.stat(node.root / "admission.sock")
    assert (stat.S_IMODE(cli_st.st_mode), cli_st.st_uid, cli_st.st_gid) == \
        (stat.S_IMODE(adm_st.st_mode), adm_st.st_uid, adm_st.st_gid)
    raw = json.dumps(MANIFEST).encode()

    with_image = json.loads(raw)
    with_image["spec"]["containers"][0]["image"] = "x"
    status, dry = _call(sock, "POST", "/v1/pods?dry_run=1&ignore_unknown_fields=1", json.dumps(with_image).encode())
    assert status == 200 and dry["dry_run"] and dry["would_admit"] and dry["pod"] is None, dry
    assert any("image" in w for w in dry["warnings"]), dry["warnings"]
    assert [c["name"] for c in dry["containers"]] == ["main"] and dry["containers"][0]["cpu_ids"]
    assert _names(sock) == []

    status, admitted = _call(sock, "POST", "/v1/pods", raw)
    assert status == 200 and admitted["pod"]["name"] == "web" and admitted["pod"]["phase"], admitted
    assert _names(sock) == ["web"]

    status, got = _call(sock, "GET", "/v1/pods/default/web")
    assert status == 200 and got["pod"]["uid"] == admitted["pod"]["uid"]
    assert got["pod"]["record"]["pod"]["spec"]["name"] == "web"
    status, short = _call(sock, "GET", "/v1/pods/default/web?summary=1")  # launch --wait's long poll asks so
    assert status == 200 and short["pod"]["uid"] == admitted["pod"]["uid"] and short["pod"]["containers"], short
    assert not {"record", "cgroup", "cgroup_dirs"} & set(short["pod"]), sorted(short["pod"])  # ps's form
    _, listed = _call(sock, "GET", "/v1/pods")
    assert "record" not in listed["pods"][0]  # ps's summary form

    assert _call(sock, "POST", "/v1/pods", raw)[0] == 409  # ALREADY_EXISTS
    status, err = _call(sock, "POST", "/v1/pods/default/web/stop", b'{"grace_seconds": 1}')
    assert (status, err["code"]) == (400, "FAILED_PRECONDITION") and "runtime" in err["message"]
    status, err = _call(sock, "POST", "/v1/pods/default/web/stop", b'{"grace_seconds": -1}')
    assert (status, err["code"]) == (400, "INVALID_ARGUMENT") and "grace_seconds" in err["message"]
    status, err = _call(sock, "GET", "/v1/pods/default/nope")
    assert (status, err["code"]) == (404, "NOT_FOUND") and "default/nope" in err["message"]
    status, err = _call(sock, "POST", "/v1/pods", b"kind: Pod\nspec: [")
    assert (status, err["code"]) == (400, "INVALID_ARGUMENT"), err

    status, removed = _call(sock, "DELETE", "/v1/pods/default/web")
    assert status == 200 and removed["pod"]["uid"] == admitted["pod"]["uid"]
    assert _names(sock) == []
    assert d.proc.poll() is None


@pytest.mark.slow
def test_bad_requests_are_refused_with_4xx_and_change_nothing(node):  # noqa: F811
    node.start()
    sock = node.root / "cli.sock"
    assert _call(sock, "POST", "/v1/pods", json.dumps(MANIFEST).encode())[0] == 200
    _, before = _call(sock, "GET", "/v1/pods")

    cases: list[tuple[bytes, int, str]] = [
        # malformed JSON, and JSON of the wrong shape, where a route takes JSON
        (b"POST /v1/pods/default/web/stop HTTP/1.1\r\nContent-Length: 5\r\n\r\n{oops", 400, "not valid JSON"),
        (b"POST /v1/pods/default/web/stop HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]", 400, "JSON object"),
        (b'POST /v1/pods/default/web/stop HTTP/1.1\r\nContent-Length: 15\r\n\r\n{"grace": "no"}', 400, "grace"),
        # unknown route and method
        (b"GET /v2/everything HTTP/1.1\r\n\r\n", 404, "no such route"),
        (b"PUT /v1/pods HTTP/1.1\r\n\r\n", 405, "not allowed"),
        # a body over the limit is refused before it is read
        (b"POST /v1/pods HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n", 413, "larger than"),
        # bad Content-Length
        (b"POST /v1/pods HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400, "Content-Length"),
        (b"POST /v1/pods HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length"),
        (b"POST /v1/pods HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 400, "twice"),
        (b"POST /v1/pods HTTP/1.1\r\nContent-Length: 100\r\n\r\nshort", 400, "closed before"),
        (b"POST /v1/pods HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501, "Transfer-Encoding"),
        # a broken head
        (b"GET /v1/pods\r\n\r\n", 400, "request line"),
        (b"GET /v1/pods HTTP/1.0\r\n\r\n", 505, "HTTP/1.1"),
        (b"GET /v1/pods HTTP/1.1\r\nno colon here\r\n\r\n", 400, "malformed header"),
        (b"GET /v1/pods HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", 431, "larger than"),
        (b"GET /v1/pods?dry_run=maybe&& HTTP/1.1\r\n\r\n", 400, "query"),
        (b"POST /v1/pods?dry_run=maybe HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400, "dry_run"),
    ]
    for data, want, words in cases:
        status, body = _raw(sock, data, half_close=data.endswith(b"short"))
        assert status == want and words in body["message"], (data[:80], status, body)
        assert "Traceback" not in body["message"]

    _, after = _call(sock, "GET", "/v1/pods")
    assert after == before  # nothing was admitted, stopped or removed


def test_one_connection_serves_several_requests(node):  # noqa: F811
    node.start()
    conn = _Conn(node.root / "cli.sock")
    try:
        for _ in range(3):
            conn.request("GET", "/v1/pods")
            resp = conn.getresponse()
            assert resp.status == 200 and resp.getheader("Connection") == "keep-alive"
            assert json.loads(resp.read())["pods"] == []
        first = conn.sock
        conn.request("GET", "/v1/pods/default/none")
        resp = conn.getresponse()
        assert resp.status == 404
        resp.read()
        assert conn.sock is first  # an admission error keeps the connection
    finally:
        conn.close()
