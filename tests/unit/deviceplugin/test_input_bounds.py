"""A built-in DevicePlugin server fed malformed and oversized requests: refused
with INVALID_ARGUMENT / NOT_FOUND / RESOURCE_EXHAUSTED and a short message."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import grpc

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from agent.devices.config import ResourceRule
from agent.devices.model import Device
from agent.deviceplugin.server import DevicePluginServer, PluginDevice
from agent.limits import GRPC_MESSAGE_LIMITS

RES = "example.com/thing"


def test_bad_allocate_requests_get_proper_codes_and_short_messages():
    d = Path(tempfile.mkdtemp(prefix="dpb-", dir="/tmp"))

    async def main():
        p = DevicePluginServer(ResourceRule(name=RES, block_name=("t*",)), d / "p.sock")
        p.update([PluginDevice(Device(id=f"t{i}", kind="block", name=f"t{i}", sysfs_path="/", numa_node=0))
                  for i in range(2)])
        await p.start()
        try:
            async with grpc.aio.insecure_channel(f"unix://{d}/p.sock") as ch:
                stub = pb_grpc.DevicePluginStub(ch)

                async def refused(call, req):
                    try:
                        await call(req, timeout=30)
                    except grpc.aio.AioRpcError as e:
                        return e.code(), e.details()
                    raise AssertionError("accepted")

                def alloc(ids):
                    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)])

                code, msg = await refused(stub.Allocate, alloc(["t0", "x" * 300]))
                assert code == grpc.StatusCode.INVALID_ARGUMENT and "device_id" in msg and len(msg) < 300
                code, msg = await refused(stub.Allocate, alloc([f"u{i:05d}" for i in range(20_000)]))
                assert code == grpc.StatusCode.NOT_FOUND and "20000 in all" in msg and len(msg) < 300
                code, msg = await refused(stub.PreStartContainer,
                                          pb.PreStartContainerRequest(devices_ids=["y" * 254]))
                assert code == grpc.StatusCode.INVALID_ARGUMENT
                code, msg = await refused(stub.GetPreferredAllocation, pb.PreferredAllocationRequest(
                    container_requests=[pb.ContainerPreferredAllocationRequest(
                        available_deviceIDs=["t0"], allocation_size=-5)]))
                assert code == grpc.StatusCode.INVALID_ARGUMENT
                raw = ch.unary_unary("/v1beta1.DevicePlugin/Allocate", request_serializer=None,
                                     response_deserializer=None)
                code, msg = await refused(raw, b"\x0a\x05\x0a\x03\xff\xfe\xfd")
                assert code == grpc.StatusCode.INVALID_ARGUMENT and "does not decode" in msg
                big = alloc(["t0"] * (GRPC_MESSAGE_LIMITS["deviceplugin"].receive // 4))
                code, _ = await refused(stub.Allocate, big)
                assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
                ok = await stub.Allocate(alloc(["t0"]), timeout=30)
                assert len(ok.container_responses) == 1
        finally:
            await p.stop()

    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        shutil.rmtree(d, ignore_errors=True)
