"""`hwagent ps --format json` is written as the daemon encoded it (issue 37 item 17).

At 5,000 pods on a 256-CPU machine the JSON listing cost 2.6 s of CPU (client 1.47 s + daemon
1.13 s, 24 MB): the daemon made a protobuf message per pod and a dict from it, the client decoded
every page, gathered every pod and wrote them again with ``json.dumps(indent=2)``, a line per CPU
id. Now the daemon builds each pod's dict from its record (``summary_json``, the same dict
``pod_json(pod_message(...))`` made) and encodes it once on one line (``pod_lines``, each shared
list of CPU ids encoded once), and the client writes the pages through. The document is the
same JSON (``{"manifest_errors": [...], "pods": [...]}``, keys sorted), one pod a line.
"""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from agent.cli import main
from agent.contracts import Placement
from agent.contracts.memory import MemoryBlock
from agent.contracts.pods import (
    AdmittedPod, ContainerAssignment, ContainerSpec, ContainerState, ContainerStatus, PodPhase, PodSpec, PodStatus,
)
from agent.cpuset import CPUSet
from agent.rootpaths import cli_socket
from agent.workloads.cliapi import _POD_LINE, list_lines, pod_lines
from agent.workloads.podjson import pod_json
from agent.workloads.server import pod_message, summary_json
from agent.workloads.store import PodRecord

POOL = CPUSet.parse("2-255")


def _record(i: int, *, released: bool = False, dedicated: bool = False, bare: bool = False) -> PodRecord:
    init = ContainerSpec("setup", ("true",), kind="init")
    spec = PodSpec(name=f"p{i}", namespace="ns" if i % 2 else "default", uid=f"u{i}",
                   containers=(ContainerSpec("main", ("sleep", "1")), ContainerSpec("side", ("sleep", "1"))),
                   init_containers=(init,), source="file:/m/x.yaml" if i % 3 == 0 else "api")
    assign = {} if bare else {
        "main": ContainerAssignment("main", CPUSet([i % 4]) if dedicated else POOL,
                                    mems=CPUSet([0]) if dedicated else None,
                                    numa_affinity=frozenset({0}) if dedicated else None,
                                    devices={"example.com/dev": ("d0", "d1")} if dedicated else {}),
        "side": ContainerAssignment("side", POOL, mems=CPUSet() if i % 5 == 0 else None),
    }
    statuses = (ContainerStatus("main", ContainerState.TERMINATED, reason="Error", message="bye \x00 \"x\"",
                                exit_code=3, restart_count=2),
                ContainerStatus("side", ContainerState.RUNNING, pid=4000 + i, started_at=2.0))
    pod = AdmittedPod(spec=spec, qos="dedicated" if dedicated else "shared", assignments=assign,
                      admitted_at=1700000000.123456 + i)
    return PodRecord(pod, PodStatus(PodPhase.RUNNING, "because", "ü message", statuses, 2.0),
                     events=((1.0, "admitted"),), released=released)


RECORDS = [_record(0), _record(1, dedicated=True), _record(2, released=True), _record(3, bare=True),
           _record(5), _record(6, dedicated=True, released=True)]


def _placement(uid: str, container: str) -> Placement | None:
    """The CPU policy's answer: the pool moved since admission for p0's side container."""
    return Placement(CPUSet.parse("4-255")) if (uid, container) == ("u0", "side") else None


def _memory(uid: str, container: str) -> list[MemoryBlock]:
    return [MemoryBlock("memory", 1 << 30, (0, 1), ((0, 1 << 29), (1, 1 << 29)))] if container == "main" else []


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.uid)
@pytest.mark.parametrize("owners", [False, True], ids=["no-owners", "owners"])
def test_summary_json_is_the_dict_the_message_made(rec, owners):
    args = ((lambda uid, c, res, dev: (1,)), _placement, _memory) if owners else (None, None, None)
    want = pod_json(pod_message(rec, args[0], args[1], True, args[2]))
    got = summary_json(rec, *args)
    assert got == want
    assert _POD_LINE(got) == _POD_LINE(want)  # the same types too: the same text


def test_pod_lines_is_each_pod_encoded_on_its_line():
    pods = [summary_json(r, None, _placement, _memory) for r in RECORDS * 3]
    want = ",\n".join(_POD_LINE(p) for p in pods)
    assert pod_lines(pods) == want
    assert len(want.split(",\n")) == len(pods) and "\n" not in want.replace(",\n", "")


def test_a_pod_string_that_looks_like_a_marker_stays_as_it_is():
    pods = [summary_json(r) for r in RECORDS]
    pods[0]["message"] = "\x00deadbeefdeadbeef:0"
    pods[1]["reason"] = '"\\u0000'
    want = ",\n".join(_POD_LINE(p) for p in pods)
    assert pod_lines(pods) == want


def test_a_page_of_lines_reads_back_as_the_page():
    pods = [summary_json(r) for r in RECORDS]
    copy = json.loads(json.dumps(pods))
    raw = list_lines(pods, [("/m/bad.yaml", "no")], "tok")
    head, _, body = raw.partition(b"\n")
    assert json.loads(head) == {"continue": "tok", "count": len(RECORDS),
                                "manifest_errors": [{"error": "no", "path": "/m/bad.yaml"}]}
    assert json.loads(b"[" + body + b"]") == copy


# -- the client: the pages written through ----------------------------------------------------


PAGES = [[summary_json(r) for r in RECORDS[:4]], [summary_json(r) for r in RECORDS[4:]]]


class _Daemon(BaseHTTPRequestHandler):
    """GET /v1/pods in two pages, as lines (``?lines=1``) or, as a daemon from before them, as JSON."""

    protocol_version = "HTTP/1.1"
    lines = True

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        q = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        n = int(q.get("continue", "0"))
        token = "" if n + 1 == len(PAGES) else str(n + 1)
        errors = [("/m/bad.yaml", "no")] if n == 0 else []
        if self.lines and q.get("lines") == "1":
            data = list_lines(json.loads(json.dumps(PAGES[n])), errors, token)
        else:
            data = json.dumps({"pods": PAGES[n], "manifest_errors": [{"path": p, "error": e} for p, e in errors],
                               "continue": token}, separators=(",", ":")).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class _Old(_Daemon):
    lines = False


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _root(tmp_path: Path, handler: type) -> Iterator[Path]:
    server = _Server(str(cli_socket(tmp_path)), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield tmp_path
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(params=[_Daemon, _Old], ids=["lines", "daemon-before-lines"])
def root(request, tmp_path) -> Iterator[Path]:
    yield from _root(tmp_path, request.param)


def test_ps_json_is_one_pod_a_line_with_sorted_keys(root, capsys):
    assert main(["ps", "--root-dir", str(root), "--format", "json"]) == 0
    out = capsys.readouterr().out
    pods = [p for page in PAGES for p in page]
    want = ('{"manifest_errors": [{"error": "no", "path": "/m/bad.yaml"}], "pods": [\n'
            + ",\n".join(json.dumps(p, sort_keys=True) for p in pods) + "\n]}\n")
    assert out == want
    doc = json.loads(out)
    assert doc == {"manifest_errors": [{"path": "/m/bad.yaml", "error": "no"}], "pods": pods}


def test_ps_json_of_no_pod_is_a_document(tmp_path, capsys):
    class Empty(_Daemon):
        def do_GET(self) -> None:  # noqa: N802
            data = list_lines([], [], "")
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    for root in _root(tmp_path, Empty):
        assert main(["ps", "--root-dir", str(root), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"manifest_errors": [], "pods": []}
