"""Malformed and oversized input to the CPU plugin's socket (issue 10, defects 2-4):
every one is INVALID_ARGUMENT (or RESOURCE_EXHAUSTED at the transport) with a
message, nothing is stored, and the plugin keeps serving."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.cpu.checkpoint import FILE_NAME
from agent.cpu.errors import PolicyError
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, parse_qos
from agent.limits import ANNOTATIONS_TOTAL_MAX, GRPC_MESSAGE_LIMITS

from .test_grpc_e2e import _run, rq

NESTED = "[" * 1000 + "]" * 1000
NESTED_OBJ = '{"a":' * 1000 + "1" + "}" * 1000


@pytest.mark.parametrize("raw", [NESTED, NESTED_OBJ, "[" * 100_000])
def test_deeply_nested_enhancement_is_invalid_argument(raw):
    with pytest.raises(PolicyError) as e:
        parse_qos({MEMORY_ENHANCEMENT_KEY: raw}, {})
    assert e.value.code == "INVALID_ARGUMENT" and MEMORY_ENHANCEMENT_KEY in e.value.message


def _with(m: pb.ResourceRequest, **maps) -> pb.ResourceRequest:
    for field, values in maps.items():
        if isinstance(values, dict):
            getattr(m, field).update(values)
        else:
            setattr(m, field, values)
    return m


def _bad_requests():
    big = "x" * 3_000_000
    yield "nested", _with(rq("p-nested"), annotations={MEMORY_ENHANCEMENT_KEY: NESTED}), \
        grpc.StatusCode.INVALID_ARGUMENT
    yield "uid", rq("u" * 37), grpc.StatusCode.INVALID_ARGUMENT
    yield "pod_name", _with(rq("p1"), pod_name="n" * 254), grpc.StatusCode.INVALID_ARGUMENT
    yield "container", _with(rq("p2"), container_name="c" * 64), grpc.StatusCode.INVALID_ARGUMENT
    yield "namespace", _with(rq("p3"), pod_namespace="s" * 64), grpc.StatusCode.INVALID_ARGUMENT
    yield "annotations", _with(rq("p4"), annotations={"example.com/a": "v" * ANNOTATIONS_TOTAL_MAX}), \
        grpc.StatusCode.INVALID_ARGUMENT
    yield "label", _with(rq("p5"), labels={"example.com/l": "v" * 64}), grpc.StatusCode.INVALID_ARGUMENT
    yield "resource_key", _with(rq("p6"), resource_requests={"r" * 400: 1.0}), grpc.StatusCode.INVALID_ARGUMENT
    # two 3 MB names: refused by the transport before anything is decoded
    yield "3MB", _with(rq("p7"), pod_name=big, container_name=big), grpc.StatusCode.RESOURCE_EXHAUSTED


def test_bad_input_over_grpc_changes_nothing(tmp_path):
    async def body(comp, ctx, stub, reg):
        assert GRPC_MESSAGE_LIMITS["resourceplugin"].receive < 6_000_000
        before = (comp.socket_path.parent / FILE_NAME).read_bytes()
        for what, m, code in _bad_requests():
            for call in (stub.Allocate, stub.GetTopologyHints):
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await call(m, timeout=30)
                assert e.value.code() == code, (what, e.value.code(), e.value.details())
                assert e.value.details() and len(e.value.details()) < 1000, what
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await stub.RemovePod(pb.RemovePodRequest(pod_uid="u" * 37), timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await stub.GetTopologyAwareResources(
                pb.GetTopologyAwareResourcesRequest(pod_uid="p", container_name="c" * 64), timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (await stub.GetResourcesAllocation(pb.GetResourcesAllocationRequest(), timeout=30)).pod_resources == {}
        assert (comp.socket_path.parent / FILE_NAME).read_bytes() == before
        # still serving: a good request right after
        r = await stub.Allocate(rq("good"), timeout=30)
        assert r.allocation_result.resource_allocation["cpu"].allocation_result

    asyncio.run(asyncio.wait_for(_run(tmp_path, body), 120))
