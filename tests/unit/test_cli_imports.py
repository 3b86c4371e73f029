"""The client path of the commands that talk to the daemon imports only what it needs.

`hwagent ps` once cost several times the CPU of the whole Slurm step it is
compared with (bench/cli.py), most of it in imports the client never used:
PyYAML, the topology manager (and through it prometheus_client), the
contracts and daemon-side modules, pulled in by loading the config. Each
command here runs to its end in a fresh interpreter against a fake admission
server (or, for ``logs``, a log file), and the modules it loaded are checked.
Since the CLI speaks HTTP/JSON on ``<root>/cli.sock`` (agent.workloads.cliapi),
grpc and protobuf (most of what was left, bench/cli.py) are forbidden too, and
so is the config loader: these commands read ``[daemon] root_dir`` alone. The
client speaks HTTP over a bare socket (agent.workloads.wire), so ``http.client``
and what it pulls in (``email``, ``ssl``) are forbidden, and so are the modules
that cost milliseconds of a launch for nothing (``typing``, ``dataclasses``,
``secrets``, ``urllib``: ``STDLIB_FORBIDDEN``). The child runs as the entry
script runs these commands, without ``site`` (``python -S``, agent.commands._entry):
nothing from site-packages is there to import.

The read commands that ask the daemon's root-only status socket (``status``, ``cpus``,
``memory``, ``resources``) cost three times a ``ps`` while they spoke gRPC (issue 37 item 16):
they now ask its HTTP/JSON twin (``<root>/status-http.sock``, agent.status.httpapi) and are held
to the same rules, against a fake of that socket too.
"""

from __future__ import annotations

import json
import os
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from agent.api.admission.v1 import api_pb2 as pb
from agent.api.status.v1 import api_pb2 as status_pb
from agent.cpu.view import Allocation, summarize
from agent.cpuset import CPUSet
from agent.rootpaths import cli_socket, status_http_socket, status_socket
from agent.status.document import status_document
from agent.runtime.logdir import log_dir, log_file_name
from agent.workloads.podjson import pod_json

REPO = Path(__file__).resolve().parents[2]

#: module names (and their submodules) that no daemon-talking command may load
FORBIDDEN = (
    "yaml",
    "prometheus_client",
    "grpc",
    "google.protobuf",
    "agent.api",
    "agent.config",
    "agent.unixsock",
    "agent.topologymanager.manager",
    "agent.topologymanager.hints",
    "agent.topologymanager.metrics",
    "agent.contracts",
    "agent.daemon.daemon",
    "agent.daemon.component",
    "agent.workloads.admission",
    "agent.workloads.manifest",
    "agent.workloads.server",
    "agent.cpu.policy",
    "agent.devicemanager.manager",
    "agent.pressure.engine",
    "agent.runtime.runtime",
)
#: standard-library modules the launch, ps and stop paths do without (each costs start-up CPU: bench/cli.py)
STDLIB_FORBIDDEN = ("argparse", "gettext", "shutil", "pathlib", "socket", "signal", "selectors", "http.client", "email", "ssl", "typing", "dataclasses", "secrets", "hashlib", "inspect",
                    # round 3: json (its decoder and encoder compile patterns with re, which imports enum and
                    # functools; agent.commands._jsonc uses the C scanner and encoder alone), collections
                    # (collections.abc at run time), importlib and the warnings it brings (agent.cli imports
                    # with __import__), types, threading (launch --wait tails its log on its one thread)
                    "json", "re", "enum", "functools", "collections", "importlib", "warnings", "types",
                    "threading", "contextlib")
#: ... and the agent modules they do without: the streaming --wait tails its log without the logs command
#: (argparse), the runtime's logdir or safepath (pathlib, contextlib, typing), or diskname's hashlib (a
#: plain pod name needs no hash)
HOT_FORBIDDEN = (*STDLIB_FORBIDDEN, "agent.commands.logs", "agent.runtime.logdir", "agent.safepath")
#: the paths a job's round trip takes: every import on them is paid per launch
HOT = (("ps",), ("status",), ("cpus",), ("memory",), ("resources",), ("stop", "job"), ("launch", "--cpus", "1", "--", "true"), ("launch", "--wait", "-q", "--", "true"),
       ("launch", "--wait", "--rm", "-q", "--", "true"), ("launch", "--wait", "--rm", "--", "true"))

#: what the client runs in the child: the command, then its exit status and module list in a file (json is
#: imported after the list is taken: it is one of the modules the hot paths must not load)
CHILD = """
import sys
sys.path.insert(0, sys.argv.pop(2))
from agent.cli import main
rc = main(sys.argv[2:])
modules = sorted(sys.modules)
import json
with open(sys.argv[1], "w") as f:
    json.dump({"rc": rc, "modules": modules}, f)
"""


def _pod(name: str = "job") -> dict:
    """A pod as the daemon's CLI API answers it; a launched pod has Succeeded."""
    c = pb.Container(name="main", kind="app", state="terminated", reason="Completed", exit_code=0)
    return pod_json(pb.Pod(name=name, namespace="default", uid="u1", qos="shared_cores", phase="Succeeded",
                           containers=[c], record_json="{}"), record=True)


class _Fake(BaseHTTPRequestHandler):
    """The daemon's answers, as few as each command needs (HTTP/1.1, kept alive)."""

    protocol_version = "HTTP/1.1"

    def _answer(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("?")[0] == "/v1/pods":  # ps pages: ?limit=N
            self._answer({"pods": [_pod()], "manifest_errors": []})
        else:
            self._answer({"pod": _pod(self.path.split("/")[4])})

    def do_POST(self) -> None:  # noqa: N802
        body = self._body()
        if self.path.startswith("/v1/pods/"):
            self._answer({"pod": _pod(self.path.split("/")[4])})
        else:
            name = json.loads(body)["metadata"]["name"]
            self._answer({"warnings": [], "dry_run": False, "would_admit": False, "reason": "", "free": "",
                          "pod": _pod(name), "containers": []})

    def do_DELETE(self) -> None:  # noqa: N802
        self._answer({"pod": _pod(self.path.split("/")[4])})

    def address_string(self) -> str:
        return "unix"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _status_answers() -> dict[str, dict]:
    """The status socket's documents, as the daemon builds them (an eviction too: its evidence is printed)."""
    resp = status_pb.GetStatusResponse(mode="standalone", mode_reason="configured", phase="running", pid=1,
                                       uptime_seconds=3.0, pods_source="registry")
    resp.components.append(status_pb.ComponentStatus(name="status", healthy=True, ready=True, detail="socket"))
    resp.pods.append(status_pb.PodStatus(namespace="default", name="job", uid="u1", qos="shared_cores",
                                         containers=["main"]))
    resp.evictions.append(status_pb.EvictionStatus(namespace="default", pod="job", reason="memory",
                                                   signal="memory.available", action="evict", wall_time=1.0,
                                                   evidence_json='{"b": 1, "a": [2]}'))
    cpus = summarize({0: CPUSet.parse("0-1")}, {"share": CPUSet.parse("1")},
                     [Allocation("u1", "default", "job", "main", "shared_cores", "share", CPUSet.parse("1"))],
                     "cpu policy (live)")
    memory = {"source": "memory manager (live)", "containers": [],
              "nodes": [{"node": 0, "resources": {"memory": {"total": 1 << 30, "reserved": 0, "allocatable": 1 << 30,
                                                            "allocated": 0, "free": 1 << 30}}}]}
    resources = {"source": "device-plugin host (live)", "resources": {}, "deleted_resources": [], "allocations": []}
    return {"/v1/status": status_document(resp), "/v1/views/cpus": cpus, "/v1/views/memory": memory,
            "/v1/views/resources": resources}


class _FakeStatus(_Fake):
    """The root-only status socket's HTTP answers (agent.status.httpapi)."""

    ANSWERS = _status_answers()

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer(self.ANSWERS[self.path])


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("root")
    server = _Server(str(cli_socket(root)), _Fake)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    status = _Server(str(status_http_socket(root)), _FakeStatus)
    threading.Thread(target=status.serve_forever, daemon=True).start()
    grpc_status = socketserver.UnixStreamServer(str(status_socket(root)), _Fake)  # there, never asked
    logs = log_dir(root, "default", "job")
    logs.mkdir(parents=True)
    (logs / log_file_name("main")).write_text("hello\n")
    try:
        yield root
    finally:
        server.shutdown()
        server.server_close()
        status.shutdown()
        status.server_close()
        grpc_status.server_close()


def _modules(root: Path, tmp_path: Path, argv: list[str]) -> tuple[int, list[str]]:
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k not in ("HWAGENT_CONFIG",)}
    child = [sys.executable, "-S", "-c", CHILD, str(out), str(REPO)]
    proc = subprocess.run([*child, *argv, "--root-dir", str(root)]
                          if "--" not in argv else
                          [*child, *argv[: argv.index("--")], "--root-dir", str(root), *argv[argv.index("--"):]],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.exists(), f"{argv}: {proc.stdout}{proc.stderr}"
    got = json.loads(out.read_text())
    return got["rc"], got["modules"]


@pytest.mark.parametrize("argv", [
    ["ps"],
    ["ps", "--format", "json"],
    ["describe", "job", "--format", "json"],
    ["stop", "job"],
    ["rm", "job"],
    ["logs", "job"],
    ["launch", "--cpus", "1", "--", "true"],
    ["launch", "--wait", "-q", "--", "true"],
    ["launch", "--wait", "--rm", "--", "true"],
    *([c] for c in ("status", "cpus", "memory", "resources")),
    *([c, "--format", "json"] for c in ("status", "cpus", "memory", "resources")),
], ids=lambda a: " ".join(a))
def test_daemon_commands_load_no_daemon_side_module(root, tmp_path, argv):
    rc, modules = _modules(root, tmp_path, argv)
    assert rc == 0
    bad = sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    assert not bad, f"hwagent {' '.join(argv)} imported {bad}"


@pytest.mark.parametrize("argv", [list(a) for a in HOT], ids=lambda a: " ".join(a))
def test_hot_paths_load_no_costly_stdlib_module(root, tmp_path, argv):
    rc, modules = _modules(root, tmp_path, argv)
    assert rc == 0
    bad = sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in HOT_FORBIDDEN))
    assert not bad, f"hwagent {' '.join(argv)} imported {bad}"
    assert "site" not in modules, "the child must run as the entry script runs light commands: without site"
