"""`hwagent ps` at 10,000 pods: the CLI's channel accepts what the admission
server may send (one limit, agent.limits), where gRPC's default 4 MiB client
limit failed past about 2,800 pods with RESOURCE_EXHAUSTED; and `hwagent ps`
reads the daemon's list a page at a time (issue 24)."""

from __future__ import annotations

import argparse
import uuid
from concurrent import futures

import grpc

from agent.api.admission.v1 import api_pb2 as pb
from agent.api.admission.v1 import api_pb2_grpc as pb_grpc
from agent.unixsock import dial
from agent.limits import GRPC_MESSAGE_LIMITS
from agent.rootpaths import admission_socket, cli_socket
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


def test_ps_lists_10000_pods_in_pages(tmp_path, capsys):
    """`hwagent ps` (the CLI's client, HTTP/JSON) against the daemon's CLI API over a registry of
    10,000 pods: it asks for pages of 1,000 in the summary form and prints the table page by
    page, every pod once, in order, the columns aligned across pages."""
    import asyncio
    import threading
    import time

    from agent.commands import ps
    from agent.workloads.cliapi import CliApi
    from tests.unit.workloads.test_list_paging import _servicer, _record

    _, w = _servicer(tmp_path, [_record("default", f"web-{i:05d}") for i in range(PODS)])
    api = CliApi(cli_socket(tmp_path), w, lambda: [("/m/bad.yaml", "not a pod")], max_body=1 << 20)
    asked: list[dict[str, str]] = []
    handle = api.handle

    async def spy(req, caller):
        if req.parts == ("v1", "pods"):  # ps also asks /v1/directory once (other fronts' workloads)
            asked.append(dict(req.query))
        return await handle(req, caller)

    api.handle = spy  # type: ignore[method-assign]
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(api.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(60)
    try:
        cpu = time.process_time()
        assert ps.run(argparse.Namespace(config=None, root_dir=str(tmp_path), format="text")) == 0
        cpu = time.process_time() - cpu
    finally:
        asyncio.run_coroutine_threadsafe(api.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
    out = capsys.readouterr().out.splitlines()
    assert [q.get("limit") for q in asked] == ["1000"] * 10, asked
    assert asked[1]["continue"] == "default/web-00999"
    rows = [line for line in out if line.startswith("default ")]
    assert [r.split()[1] for r in rows] == [f"web-{i:05d}" for i in range(PODS)]
    assert out[0].startswith("NAMESPACE ") and sum(line.startswith("NAMESPACE") for line in out) == 1
    assert len({line.index("shared") for line in rows}) == 1  # aligned across pages
    assert out[-1] == "manifest error: /m/bad.yaml: not a pod"
    print(f"ps at {PODS} pods: {cpu * 1e3:.0f} ms CPU, client and server in this process")
