"""Registration client: waits for the host's socket, retries refusals with
backoff, registers again when the socket is recreated; the plugin's streams
end when it stops."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from prometheus_client import REGISTRY

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from agent.devices.config import ResourceRule
from agent.devices.model import Device
from agent.deviceplugin.registration import Registrar
from agent.deviceplugin.server import DevicePluginServer, PluginDevice, socket_name
from tests.integration.deviceplugin.kubelet_stub import KubeletStub, registrations_reaching

RES = "example.com/thing"


class Refusing(KubeletStub):
    """Refuses the first ``n`` Register calls, like a kubelet still starting."""

    def __init__(self, path, n):
        super().__init__(path)
        self.refuse = n

    async def Register(self, request, context):
        if self.refuse > 0:
            self.refuse -= 1
            self.requests.append(request)
            await context.abort(grpc.StatusCode.UNAVAILABLE, "kubelet not ready")
        return await super().Register(request, context)


def _plugin(tmp_path, pre_start=False):
    rule = ResourceRule(name=RES, block_name=("t*",), pre_start_required=pre_start)
    p = DevicePluginServer(rule, tmp_path / socket_name(RES))
    p.update([PluginDevice(Device(id="t0", kind="block", name="t0", sysfs_path="/", numa_node=1))])
    return p


def test_waits_for_socket_then_retries_refusals(tmp_path):
    async def run():
        plugin = _plugin(tmp_path, pre_start=True)
        await plugin.start()
        reg = Registrar(plugin, tmp_path / "kubelet.sock", backoff_initial_s=0.02, backoff_max_s=0.05,
                        check_interval_s=0.02)
        reg.start()
        await asyncio.sleep(0.1)
        assert not reg.registered.is_set() and "does not exist" in reg.last_error
        before = REGISTRY.get_sample_value("hwagent_builtin_plugin_registrations_total",
                                           {"resource": RES, "result": "error"}) or 0
        kubelet = Refusing(tmp_path / "kubelet.sock", 2)
        await kubelet.start()
        ep = await kubelet.endpoint(RES)
        assert len(kubelet.requests) == 3 and await registrations_reaching(reg, 1) == 1
        assert REGISTRY.get_sample_value("hwagent_builtin_plugin_registrations_total",
                                         {"resource": RES, "result": "error"}) == before + 2
        r = kubelet.requests[-1]
        assert (r.version, r.endpoint, r.resource_name) == ("v1beta1", socket_name(RES), RES)
        assert r.options.pre_start_required and r.options.get_preferred_allocation_available
        assert ep.options.pre_start_required
        assert ep.latest() == {"t0": ("Healthy", (1,))}
        await ep.stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=["t0"]))
        # kubelet restart: socket recreated, plugin socket wiped -> served again + re-registered
        await kubelet.stop(cleanup_plugin_sockets=True)
        kubelet2 = KubeletStub(tmp_path / "kubelet.sock")
        await kubelet2.start()
        await kubelet2.endpoint(RES)
        assert await registrations_reaching(reg, 2) == 2 and plugin.serving()
        await reg.stop()
        await plugin.stop()
        await kubelet2.stop()

    asyncio.run(run())


def test_stop_ends_list_and_watch_and_removes_socket(tmp_path):
    async def run():
        plugin = _plugin(tmp_path)
        await plugin.start()
        async with grpc.aio.insecure_channel(f"unix://{plugin.socket_path}") as ch:
            stub = pb_grpc.DevicePluginStub(ch)
            streams = [stub.ListAndWatch(pb.Empty()) for _ in range(2)]
            for s in streams:
                assert [d.ID for d in (await s.read()).devices] == ["t0"]
            plugin.update([])
            for s in streams:  # every watcher gets the full (now empty) list
                assert list((await s.read()).devices) == []
            assert not plugin.update([])  # unchanged: no push
            await plugin.stop()
            for s in streams:
                assert await s.read() is grpc.aio.EOF
        assert not plugin.socket_path.exists()

    asyncio.run(run())


def test_socket_path_too_long(tmp_path):
    rule = ResourceRule(name=RES, block_name=("t*",))
    p = DevicePluginServer(rule, tmp_path / ("x" * 120) / "p.sock")
    with pytest.raises(ValueError, match="longer than the 107 bytes"):
        asyncio.run(p.start())
