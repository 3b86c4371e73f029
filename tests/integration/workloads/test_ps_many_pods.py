"""`hwagent ps` at 10,000 pods: the CLI's channel accepts what the admission
server may send (one limit, agent.limits), where gRPC's default 4 MiB client
limit failed past about 2,800 pods with RESOURCE_EXHAUSTED."""

from __future__ import annotations

import argparse
import json
import uuid
from concurrent import futures

import grpc

from agent.api.admission.v1 import api_pb2 as pb
from agent.api.admission.v1 import api_pb2_grpc as pb_grpc
from agent.commands._admission import call
from agent.unixsock import dial
from agent.limits import GRPC_MESSAGE_LIMITS
from agent.rootpaths import admission_socket, cli_socket
from agent.workloads.cliapi import answer
from agent.contracts.pods import ContainerState, ContainerStatus, PodPhase, PodStatus
from agent.workloads.server import pod_message
from agent.workloads.store import PodRecord
from tests.unit.workloads.test_store import _pod

PODS = 10_000


def _one_pod() -> pb.Pod:
    """A pod as the daemon answers it: two containers, CPUs, a device, events, the record."""
    status = PodStatus(PodPhase.RUNNING, "", "", (ContainerStatus("main", ContainerState.RUNNING, pid=42,
                                                                  started_at=2.5),), 2.0)
    rec = PodRecord(_pod(str(uuid.uuid4()), "web-frontend-7d9f8b6c5d-x2k4p"), status, released=False,
                    events=((1.0, "admitted"), (2.0, "started main")))
    return pod_message(rec)


class _ManyPods(pb_grpc.AdmissionServicer):
    def __init__(self) -> None:
        self.answer = pb.ListResponse(pods=[_one_pod()] * PODS)

    def List(self, request, context):  # noqa: N802 - the gRPC method's name
        return self.answer


def test_a_program_lists_10000_pods(tmp_path):
    servicer = _ManyPods()
    size = servicer.answer.ByteSize()
    assert size > 16 * 1024 * 1024  # bigger than gRPC's default and than the old 16 MiB bound
    # the daemon's admission server limits (agent.grpcguard.new_server("admission"))
    server = grpc.server(futures.ThreadPoolExecutor(2), options=GRPC_MESSAGE_LIMITS["admission"].options())
    pb_grpc.add_AdmissionServicer_to_server(servicer, server)
    sock = admission_socket(tmp_path)
    assert server.add_insecure_port(f"unix:{sock}")
    server.start()
    try:
        with dial(sock, "admission") as ch:  # a program's channel, as agent.unixsock dials it
            resp = pb_grpc.AdmissionStub(ch).List(pb.ListRequest(), timeout=120)
        assert len(resp.pods) == PODS
    finally:
        server.stop(None)


def test_ps_lists_10000_pods(tmp_path):
    """The CLI's client (HTTP/JSON, agent.commands._admission) reads the daemon's answer for
    10,000 pods whole: it has no message limit to outgrow."""
    import socketserver
    import threading
    from http.server import BaseHTTPRequestHandler

    body = json.dumps(answer("List", _ManyPods().answer)).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def address_string(self) -> str:
            return "unix"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = socketserver.UnixStreamServer(str(cli_socket(tmp_path)), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        args = argparse.Namespace(config=None, root_dir=str(tmp_path))
        resp = call(args, "GET", "/v1/pods", timeout=120)
        assert len(resp["pods"]) == PODS and resp["pods"][0]["name"] == "web-frontend-7d9f8b6c5d-x2k4p"
    finally:
        server.shutdown()
        server.server_close()
