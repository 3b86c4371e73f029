"""Idle connections to the metrics port cannot take the daemon's descriptors.

Any local user can connect to 127.0.0.1:9464. Before the bound, each idle connection
held a descriptor for the read timeout, and enough of them (under the unit's default
descriptor limit) made checkpoint writes and gRPC accepts fail with EMFILE. The daemon
here runs with a low RLIMIT_NOFILE on purpose: twice as many idle connections
than it has descriptors, and it still serves gRPC and answers /healthz.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from pathlib import Path

import grpc

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.daemon.metrics_http import ACCEPT_BACKLOG, MAX_CONNECTIONS

from .test_lifecycle import daemons, get, metrics_url, systemd  # noqa: F401 - fixtures

NOFILE = 256  # the daemon's own limit in this test: far below the connections opened
IDLE = 2 * NOFILE


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_idle_connections_do_not_exhaust_descriptors(tmp_path: Path, systemd, daemons) -> None:  # noqa: F811
    d = daemons(tmp_path, env={"NOTIFY_SOCKET": systemd.env_value}, components=("agent.cpu.component:create",),
                nofile=NOFILE)
    url = metrics_url(systemd.wait_for("READY", d.proc))
    host, port = urllib.parse.urlsplit(url).netloc.rsplit(":", 1)
    before = _open_fds(d.proc.pid)
    idle: list[socket.socket] = []
    try:
        for _ in range(IDLE):  # connect and say nothing, as a descriptor hog would
            s = socket.create_connection((host, int(port)), timeout=30)
            idle.append(s)
        status, _, body = get(url.replace("/metrics", "/healthz"))
        assert status == 200 and body.startswith("ok\n"), (status, body)
        held = _open_fds(d.proc.pid)
        # bounded, whatever the clients do: the bound plus one accept batch still being closed
        assert held <= before + MAX_CONNECTIONS + 2 * ACCEPT_BACKLOG, (before, held)

        # gRPC keeps accepting and answering: the CPU policy socket, a read
        sock = d.root / "cpu" / "qrm_cpu_plugin_dynamic.sock"
        with grpc.insecure_channel(f"unix://{sock}") as ch:
            resp = pb_grpc.ResourcePluginStub(ch).GetResourcesAllocation(pb.GetResourcesAllocationRequest(),
                                                                          timeout=30)
        assert dict(resp.pod_resources) == {}
        # displaced idle connections were closed by the daemon, not left half-open
        closed = 0
        for s in idle[:MAX_CONNECTIONS]:
            s.settimeout(10)
            try:
                closed += s.recv(1) == b""
            except (ConnectionResetError, TimeoutError):
                closed += 1
        assert closed == MAX_CONNECTIONS
    finally:
        for s in idle:
            s.close()
    assert d.stop() == 0
    assert "Too many open files" not in d.log(), d.log()[-2000:]
