"""`hwagent ps` at 10,000 pods: the CLI's channel accepts what the admission
server may send (one limit, agent.limits), where gRPC's default 4 MiB client
limit failed past about 2,800 pods with RESOURCE_EXHAUSTED."""

from __future__ import annotations

import argparse
import uuid
from concurrent import futures

import grpc

from agent.api.admission.v1 import api_pb2 as pb
from agent.api.admission.v1 import api_pb2_grpc as pb_grpc
from agent.commands._admission import call
from agent.limits import GRPC_MESSAGE_LIMITS
from agent.rootpaths import admission_socket
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


def test_ps_lists_10000_pods(tmp_path):
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
        args = argparse.Namespace(config=None, root_dir=str(tmp_path))
        resp = call(args, lambda stub: stub.List(pb.ListRequest(), timeout=120))
        assert len(resp.pods) == PODS
    finally:
        server.stop(None)
