"""The client path of the commands that talk to the daemon imports only what it needs.

`hwagent ps` once cost several times the CPU of the whole Slurm step it is
compared with (bench/cli.py), most of it in imports the client never used:
PyYAML, the topology manager (and through it prometheus_client), the
contracts and daemon-side modules, pulled in by loading the config. Each
command here runs to its end in a fresh interpreter against a fake admission
server (or, for ``logs``, a log file), and the modules it loaded are checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from agent.api.admission.v1 import api_pb2 as pb
from agent.api.admission.v1 import api_pb2_grpc as pb_grpc
from agent.rootpaths import admission_socket
from agent.runtime.logdir import log_dir, log_file_name

REPO = Path(__file__).resolve().parents[2]

#: module names (and their submodules) that no daemon-talking command may load
FORBIDDEN = (
    "yaml",
    "prometheus_client",
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
# grpc itself imports asyncio (grpc.aio), and grpc and protobuf are most of what is left:
# bench/cli.py measures it, docs/performance.md says what a lighter protocol would save.

#: what the client runs in the child: the command, then its exit status and module list in a file
CHILD = """
import json, sys
from agent.cli import main
rc = main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    json.dump({"rc": rc, "modules": sorted(sys.modules)}, f)
"""


class _Fake(pb_grpc.AdmissionServicer):
    """The daemon's answers, as few as each command needs; a launched pod has Succeeded."""

    def _pod(self, name: str = "job") -> pb.Pod:
        c = pb.Container(name="main", kind="app", state="terminated", reason="Completed", exit_code=0)
        return pb.Pod(name=name, namespace="default", uid="u1", qos="shared_cores", phase="Succeeded",
                      containers=[c])

    def List(self, request, context):  # noqa: N802 - the gRPC method's name
        return pb.ListResponse(pods=[self._pod()])

    def Get(self, request, context):  # noqa: N802
        return pb.GetResponse(pod=self._pod(request.pod.name))

    def Stop(self, request, context):  # noqa: N802
        return pb.StopResponse(pod=self._pod(request.pod.name))

    def Admit(self, request, context):  # noqa: N802
        name = json.loads(request.manifest)["metadata"]["name"]
        return pb.AdmitResponse(pod=self._pod(name))


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("root")
    server = grpc.server(futures.ThreadPoolExecutor(2))
    pb_grpc.add_AdmissionServicer_to_server(_Fake(), server)
    assert server.add_insecure_port(f"unix:{admission_socket(root)}")
    server.start()
    logs = log_dir(root, "default", "job")
    logs.mkdir(parents=True)
    (logs / log_file_name("main")).write_text("hello\n")
    try:
        yield root
    finally:
        server.stop(None)


def _modules(root: Path, tmp_path: Path, argv: list[str]) -> tuple[int, list[str]]:
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k not in ("HWAGENT_CONFIG",)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out), *argv, "--root-dir", str(root)]
                          if "--" not in argv else
                          [sys.executable, "-c", CHILD, str(out), *argv[: argv.index("--")], "--root-dir",
                           str(root), *argv[argv.index("--"):]],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.exists(), f"{argv}: {proc.stdout}{proc.stderr}"
    got = json.loads(out.read_text())
    return got["rc"], got["modules"]


@pytest.mark.parametrize("argv", [
    ["ps"],
    ["ps", "--format", "json"],
    ["stop", "job"],
    ["logs", "job"],
    ["launch", "--cpus", "1", "--", "true"],
    ["launch", "--wait", "-q", "--", "true"],
], ids=lambda a: " ".join(a))
def test_daemon_commands_load_no_daemon_side_module(root, tmp_path, argv):
    rc, modules = _modules(root, tmp_path, argv)
    assert rc == 0
    bad = sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    assert not bad, f"hwagent {' '.join(argv)} imported {bad}"
