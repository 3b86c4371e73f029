"""The CLI's client and the daemon's server frame HTTP by one set of rules (agent.workloads.wire)."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

from agent.commands._admission import _Connection
from agent.workloads import wire
from agent.workloads.http11 import HttpError, Response, parse_head, render


@pytest.mark.parametrize("text", ["web", "a b", "ns/x", "ü-ñ", "%41", "a&b=c", "~._-"])
def test_quote_is_what_the_server_unquotes(text):
    assert unquote(wire.quote(text)) == text
    assert "/" not in wire.quote(text) and " " not in wire.quote(text)


def test_a_client_request_parses_on_the_server():
    body = b'{"x": 1}'
    target = "/v1/pods/" + wire.quote("my ns") + "?" + wire.urlencode({"wait": "terminal", "t": "a b&c"})
    req, length = parse_head(wire.request_head("POST", target, len(body)), max_body=100)
    assert (req.method, req.parts, req.query, length) == ("POST", ("v1", "pods", "my ns"),
                                                           {"wait": "terminal", "t": "a b&c"}, len(body))


def test_the_server_and_the_client_refuse_the_same_framing():
    for head in (b"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                 b"GET / HTTP/1.1\r\nContent-Length: 500\r\n\r\n", b"GET / HTTP/1.1\r\nbad header\r\n\r\n"):
        with pytest.raises(HttpError) as server:
            parse_head(head, max_body=100)
        with pytest.raises(wire.WireError) as client:
            lines = wire.split_head(head)
            wire.body_length(wire.header_fields(lines[1:]), 100)
        assert server.value.status == client.value.status


def _serve(path: Path, answers: list[bytes]) -> threading.Thread:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def run() -> None:
        conn, _ = srv.accept()
        with conn, srv:
            for answer in answers:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                for i in range(0, len(answer), 7):  # in small pieces: the client must reassemble
                    conn.sendall(answer[i:i + 7])

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_the_client_reads_the_servers_answers_on_one_connection(tmp_path):
    big = {"pods": ["x" * 100] * 500}
    answers = [render(Response(200, {"a": 1}), True), render(Response(404, {"code": "NOT_FOUND"}), True),
               render(Response(200, big), False)]
    t = _serve(tmp_path / "s", answers)
    conn = _Connection(tmp_path / "s")
    assert conn.exchange("GET", "/a", b"", 10) == (200, b'{"a":1}')
    assert conn.exchange("GET", "/b", b"", 10)[0] == 404
    status, body = conn.exchange("POST", "/c", b"{}", 10)
    assert (status, json.loads(body)) == (200, big)
    assert conn.sock is None, "Connection: close closes the client's side"
    t.join(10)


def test_a_cut_answer_is_an_error_not_a_short_body(tmp_path):
    t = _serve(tmp_path / "s", [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"])
    conn = _Connection(tmp_path / "s")
    with pytest.raises(ConnectionResetError):
        conn.exchange("GET", "/a", b"", 10)
    t.join(10)
    conn.close()


def test_a_long_polls_idle_runs_while_no_answer_came_and_not_after(tmp_path):
    """launch --wait streams its log from ``idle`` while the long poll waits, on the same thread."""
    answered = threading.Event()
    calls: list[bool] = []
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(tmp_path / "s"))
    srv.listen(1)

    def run() -> None:
        conn, _ = srv.accept()
        with conn, srv:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            deadline = time.monotonic() + 60
            while len(calls) < 3 and time.monotonic() < deadline:  # the answer waits for three idle calls
                time.sleep(0.01)
            answered.set()
            conn.sendall(render(Response(200, {"done": True}), True))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    conn = _Connection(tmp_path / "s")
    status, body = conn.exchange("GET", "/w", b"", 60, idle=lambda: calls.append(answered.is_set()), idle_s=0.01)
    assert (status, json.loads(body)) == (200, {"done": True})
    assert len(calls) >= 3 and not any(calls), "idle ran only while the answer had not come"
    assert conn.sock is not None and conn.sock.gettimeout() == 60, "the request's own timeout is back"
    t.join(10)
    conn.close()


def test_a_long_poll_with_idle_still_times_out(tmp_path):
    done = threading.Event()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(tmp_path / "s"))
    srv.listen(1)

    def run() -> None:  # reads the request and never answers
        conn, _ = srv.accept()
        with conn, srv:
            conn.recv(4096)
            done.wait(60)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    conn = _Connection(tmp_path / "s")
    calls: list[int] = []
    try:
        with pytest.raises(TimeoutError):
            conn.exchange("GET", "/w", b"", 0.3, idle=lambda: calls.append(1), idle_s=0.05)
        assert calls, "idle ran while it waited"
    finally:
        done.set()
        conn.close()
        t.join(10)
