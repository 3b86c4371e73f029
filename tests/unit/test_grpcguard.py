"""The guard every hwagent gRPC server carries (agent/grpcguard.py), on a real
grpc.aio server over a unix socket: what an escaping exception, an undecodable
body, an over-limit field and an oversized body become."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import threading
from pathlib import Path

import grpc
from prometheus_client import REGISTRY

from agent.api.podresources.v1 import api_pb2 as pr
from agent.grpcguard import OFFLOAD_BYTES, new_server
from agent.limits import GRPC_MESSAGE_LIMITS, check_name

SERVICE = "test.Guarded"
decoded_in: list[str] = []


def _deserialize(raw: bytes) -> pr.GetPodResourcesRequest:
    decoded_in.append(threading.current_thread().name)
    return pr.GetPodResourcesRequest.FromString(raw)


async def _get(request, context):
    if request.pod_name == "boom":
        raise RuntimeError("a bug")
    if request.pod_name == "abort":
        await context.abort(grpc.StatusCode.NOT_FOUND, "chosen by the handler")
    check_name("pod_namespace", request.pod_namespace)
    return pr.GetPodResourcesResponse(pod_resources=pr.PodResources(name=request.pod_name[:10]))


async def _watch(request, context):
    yield pr.GetPodResourcesResponse()
    raise KeyError("a bug in a stream")


def _handlers():
    return grpc.method_handlers_generic_handler(SERVICE, {
        "Get": grpc.unary_unary_rpc_method_handler(
            _get, request_deserializer=_deserialize, response_serializer=pr.GetPodResourcesResponse.SerializeToString),
        "Watch": grpc.unary_stream_rpc_method_handler(
            _watch, request_deserializer=_deserialize,
            response_serializer=pr.GetPodResourcesResponse.SerializeToString),
    })


def _metric(name, **labels):
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_guard_maps_every_failure_to_a_proper_code(caplog):
    d = Path(tempfile.mkdtemp(prefix="guard-", dir="/tmp"))

    async def main():
        server = new_server("resourceplugin")
        server.add_generic_rpc_handlers((_handlers(),))
        server.add_insecure_port(f"unix:{d}/s.sock")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"unix://{d}/s.sock") as ch:
                get = ch.unary_unary(f"/{SERVICE}/Get", request_serializer=None, response_deserializer=None)
                watch = ch.unary_stream(f"/{SERVICE}/Watch", request_serializer=None, response_deserializer=None)

                async def code(body: bytes, call=get):
                    try:
                        if call is get:
                            await get(body, timeout=30)
                        else:
                            async for _ in watch(body, timeout=30):
                                pass
                    except grpc.aio.AioRpcError as e:
                        return e.code(), e.details()
                    return grpc.StatusCode.OK, ""

                def body(**kw) -> bytes:
                    return pr.GetPodResourcesRequest(**kw).SerializeToString()

                internal0 = _metric("hwagent_grpc_internal_errors_total", api="resourceplugin", method="Get",
                                    exception="RuntimeError")
                c, msg = await code(body(pod_name="boom"))
                assert c == grpc.StatusCode.INTERNAL and "RuntimeError" in msg and "a bug" not in msg
                assert _metric("hwagent_grpc_internal_errors_total", api="resourceplugin", method="Get",
                               exception="RuntimeError") == internal0 + 1
                failed = [r for r in caplog.records if r.getMessage() == "grpc handler failed"]
                assert len(failed) == 1 and failed[0].levelno == logging.ERROR and failed[0].exc_info

                for garbage in (b"\xff\xff\xff", b"\x0a\x02\xff\xfe", b"\x12"):
                    c, msg = await code(garbage)
                    assert c == grpc.StatusCode.INVALID_ARGUMENT and "does not decode" in msg, (garbage, c, msg)
                assert _metric("hwagent_grpc_rejected_requests_total", api="resourceplugin", method="Get",
                               reason="undecodable") >= 3
                assert not [r for r in caplog.records if r.name.startswith("grpc")]  # no library tracebacks

                c, msg = await code(body(pod_name="p", pod_namespace="n" * 64))
                assert c == grpc.StatusCode.INVALID_ARGUMENT and "pod_namespace" in msg and "limit is 63" in msg
                assert await code(body(pod_name="abort")) == (grpc.StatusCode.NOT_FOUND, "chosen by the handler")
                assert (await code(body(pod_name="ok")))[0] == grpc.StatusCode.OK

                c, msg = await code(body(pod_name="x"), call=watch)
                assert c == grpc.StatusCode.INTERNAL and "KeyError" in msg

                # a large body that is allowed is decoded off the event loop ...
                decoded_in.clear()
                assert (await code(body(pod_name="y" * OFFLOAD_BYTES)))[0] == grpc.StatusCode.OK
                assert decoded_in and decoded_in[-1] != threading.main_thread().name
                # ... and a body over the API's limit never reaches Python
                decoded_in.clear()
                limit = GRPC_MESSAGE_LIMITS["resourceplugin"].receive
                c, _ = await code(body(pod_name="z" * limit))
                assert c == grpc.StatusCode.RESOURCE_EXHAUSTED and decoded_in == []
        finally:
            await server.stop(None)

    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_every_hwagent_server_is_made_by_new_server():
    """A server built with plain grpc.aio.server() would have no guard and gRPC's default limits."""
    agent = Path(__file__).resolve().parents[2] / "agent"
    offenders = [str(p.relative_to(agent)) for p in agent.rglob("*.py")
                 if "grpc.aio.server(" in p.read_text() and p.name != "grpcguard.py" and "api" not in p.parts]
    assert offenders == []
