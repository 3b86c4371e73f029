"""hwagent's DRA driver as the kubelet dials it: the registration socket, DRAPlugin v1/v1beta1 and
NodeWatchResources, over real unix sockets, with a stand-in ClaimPreparer and device plugins."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import grpc
import pytest

from agent.api.dra.v1 import api_pb2 as v1
from agent.api.dra.v1 import api_pb2_grpc as v1_grpc
from agent.api.dra.v1beta1 import api_pb2 as v1beta1
from agent.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from agent.api.drahealth.v1alpha1 import api_pb2 as hpb
from agent.api.drahealth.v1alpha1 import api_pb2_grpc as h_grpc
from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from agent.config import section_defaults
from agent.contracts import DEVICE_PLUGINS, DRA_DRIVER, DaemonContext
from agent.contracts.dra import ClaimRef, PreparedDevice, PrepareOutcome
from agent.contracts.plugins import PluginDeviceState, PluginState
from agent.dra.kubeletplugin.component import DRAKubeletPlugin
from agent.topology.model import synthetic
from agent.unixsock import dial

pytestmark = pytest.mark.timeout(60)


class FakeDriver:
    """A ClaimPreparer: claims named 'bad-*' fail alone; 'io-*' fail the journal; others get one device."""

    def __init__(self) -> None:
        self.state: dict[str, tuple[ClaimRef, tuple[PreparedDevice, ...]]] = {}
        self.calls: list[tuple[str, list[str]]] = []

    def prepared(self):
        return dict(self.state)

    async def prepare(self, claims: Sequence[ClaimRef]):
        self.calls.append(("prepare", [c.uid for c in claims]))
        if any(c.name.startswith("io-") for c in claims):
            raise OSError(28, "No space left on device")
        out = {}
        for c in claims:
            if c.name.startswith("bad-"):
                out[c.uid] = PrepareOutcome(error=f"claim {c.namespace}/{c.name} has no allocation")
                continue
            dev = PreparedDevice(("req-0",), "node-a/example.com/disk", "loop7",
                                 (f"hwagent.io/claim={c.uid}-loop7",))
            self.state[c.uid] = (c, (dev,))
            out[c.uid] = PrepareOutcome(devices=(dev,))
        return out

    async def unprepare(self, claims: Sequence[ClaimRef]):
        self.calls.append(("unprepare", [c.uid for c in claims]))
        for c in claims:
            self.state.pop(c.uid, None)
        return {c.uid: "" for c in claims}


class FakePlugins:
    def __init__(self) -> None:
        self.healthy = {"loop7": True, "loop8": True}

    def plugin_states(self):
        return []  # the DRA resource has no device plugin

    def dra_states(self):
        devs = tuple(PluginDeviceState(d, ok, "" if ok else "kernel: I/O error", 0)
                     for d, ok in sorted(self.healthy.items()))
        return [PluginState("example.com/disk", Path("/x.sock"), devs)]


async def _until(cond, deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < end, "condition not met in time"
        await asyncio.sleep(0.02)


async def _started(tmp_path: Path, *, driver: FakeDriver | None, plugins: FakePlugins):
    ctx = DaemonContext(section_defaults(), tmp_path / "root", synthetic(), mode="kubelet")
    ctx.publish(DEVICE_PLUGINS, plugins)
    comp = DRAKubeletPlugin("hwagent.io", tmp_path / "kubelet", "node-a", health_interval_s=0.05)
    await comp.start(ctx)
    if driver is not None:
        ctx.publish(DRA_DRIVER, driver)  # published after this component started: held deferred
    return ctx, comp


def test_registration_answers_what_the_kubelet_needs(tmp_path: Path) -> None:
    async def go():
        _, comp = await _started(tmp_path, driver=FakeDriver(), plugins=FakePlugins())
        try:
            reg = tmp_path / "kubelet" / "plugins_registry" / "hwagent.io-reg.sock"
            async with dial(reg, "pluginregistration", aio=True) as ch:
                stub = reg_grpc.RegistrationStub(ch)
                info = await stub.GetInfo(reg_pb.InfoRequest())
                assert comp.state()["registered"] is None
                await stub.NotifyRegistrationStatus(reg_pb.RegistrationStatus(plugin_registered=False,
                                                                              error="version mismatch"))
            assert (comp.state()["registered"], comp.state()["error"]) == (False, "version mismatch")
            return info
        finally:
            await comp.stop()

    info = asyncio.run(go())
    assert info.type == "DRAPlugin" and info.name == "hwagent.io"
    assert info.endpoint == str(tmp_path / "kubelet" / "plugins" / "hwagent.io" / "dra.sock")
    assert {"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"} <= set(info.supported_versions)
    assert not (tmp_path / "kubelet" / "plugins_registry" / "hwagent.io-reg.sock").exists()


@pytest.mark.parametrize("pb,grpc_mod", [(v1, v1_grpc), (v1beta1, v1beta1_grpc)], ids=["v1", "v1beta1"])
def test_prepare_and_unprepare_per_claim(tmp_path: Path, pb, grpc_mod) -> None:
    driver = FakeDriver()

    async def go():
        _, comp = await _started(tmp_path, driver=driver, plugins=FakePlugins())
        try:
            async with dial(comp.dra_socket, "dra", aio=True) as ch:
                stub = grpc_mod.DRAPluginStub(ch)
                good = pb.Claim(namespace="ns", name="gpu", uid="u1")
                bad = pb.Claim(namespace="ns", name="bad-one", uid="u2")
                prep = await stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=[good, bad]))
                again = await stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=[good]))
                unprep = await stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(claims=[good]))
                return prep, again, unprep
        finally:
            await comp.stop()

    prep, again, unprep = asyncio.run(go())
    assert set(prep.claims) == {"u1", "u2"}
    dev = prep.claims["u1"].devices[0]
    assert (list(dev.request_names), dev.pool_name, dev.device_name, list(dev.cdi_device_ids)) == (
        ["req-0"], "node-a/example.com/disk", "loop7", ["hwagent.io/claim=u1-loop7"])
    assert prep.claims["u1"].error == ""
    assert prep.claims["u2"].error == "claim ns/bad-one has no allocation" and not prep.claims["u2"].devices
    assert again.claims["u1"] == prep.claims["u1"]
    assert unprep.claims["u1"].error == "" and driver.state == {}


@pytest.mark.parametrize("claims,code,text", [
    ([v1.Claim(namespace="ns", name="a", uid="")], grpc.StatusCode.INVALID_ARGUMENT, "uid is empty"),
    ([v1.Claim(namespace="", name="a", uid="u")], grpc.StatusCode.INVALID_ARGUMENT, "namespace is empty"),
    ([v1.Claim(namespace="ns", name="a", uid="u" * 37)], grpc.StatusCode.INVALID_ARGUMENT, "longer than 36"),
    ([v1.Claim(namespace="ns", name="a", uid="u"), v1.Claim(namespace="ns", name="b", uid="u")],
     grpc.StatusCode.INVALID_ARGUMENT, "named twice"),
    ([v1.Claim(namespace="ns", name="io-x", uid="u")], grpc.StatusCode.UNAVAILABLE, "No space left"),
], ids=["no-uid", "no-namespace", "long-uid", "twice", "journal-error"])
def test_bad_requests_get_a_code_and_change_nothing(tmp_path: Path, claims, code, text) -> None:
    driver = FakeDriver()

    async def go():
        _, comp = await _started(tmp_path, driver=driver, plugins=FakePlugins())
        try:
            async with dial(comp.dra_socket, "dra", aio=True) as ch:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await v1_grpc.DRAPluginStub(ch).NodePrepareResources(v1.NodePrepareResourcesRequest(claims=claims))
                return err.value
        finally:
            await comp.stop()

    e = asyncio.run(go())
    assert e.code() == code and text in e.details()
    assert driver.state == {}
    # a malformed claim never reaches the driver
    assert driver.calls == ([("prepare", ["u"])] if code == grpc.StatusCode.UNAVAILABLE else [])


def test_no_driver_yet_is_unavailable(tmp_path: Path) -> None:
    async def go():
        _, comp = await _started(tmp_path, driver=None, plugins=FakePlugins())
        try:
            async with dial(comp.dra_socket, "dra", aio=True) as ch:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await v1beta1_grpc.DRAPluginStub(ch).NodeUnprepareResources(
                        v1beta1.NodeUnprepareResourcesRequest(claims=[v1beta1.Claim(namespace="n", name="a", uid="u")]))
                return err.value
        finally:
            await comp.stop()

    assert asyncio.run(go()).code() == grpc.StatusCode.UNAVAILABLE


def test_health_stream_follows_a_device_flip(tmp_path: Path) -> None:
    plugins = FakePlugins()

    async def go():
        _, comp = await _started(tmp_path, driver=FakeDriver(), plugins=plugins)
        try:
            async with dial(comp.dra_socket, "dra", aio=True) as ch:
                stream = h_grpc.DRAResourceHealthStub(ch).NodeWatchResources(hpb.NodeWatchResourcesRequest())
                first = await stream.read()
                plugins.healthy["loop8"] = False
                flipped = await stream.read()
                del plugins.healthy["loop7"]
                gone = await stream.read()
                await _until(lambda: comp.state()["health_streams"] == 1)
                stream.cancel()
                return first, flipped, gone
        finally:
            await comp.stop()

    first, flipped, gone = asyncio.run(go())

    def rows(resp):
        return [(d.device.pool_name, d.device.device_name, hpb.HealthStatus.Name(d.health), d.message)
                for d in resp.devices]

    pool = "node-a/example.com/disk"
    assert rows(first) == [(pool, "loop7", "HEALTHY", ""), (pool, "loop8", "HEALTHY", "")]
    assert rows(flipped) == [(pool, "loop8", "UNHEALTHY", "kernel: I/O error")]
    assert rows(gone) == [(pool, "loop7", "UNKNOWN", "the device is no longer offered")]
    assert all(d.last_updated_time > 0 for d in first.devices)


def test_status_shows_the_kubelets_verdict(tmp_path: Path) -> None:
    from agent.contracts.drakubelet import DRA_KUBELET_PLUGIN
    from agent.status.component import StatusComponent
    from agent.status.views import Handles

    async def go():
        ctx, comp = await _started(tmp_path, driver=FakeDriver(), plugins=FakePlugins())
        status = StatusComponent()
        status._ctx = ctx
        status._handles = Handles(dra_plugin=ctx.lookup(DRA_KUBELET_PLUGIN))
        ctx.component_health = lambda: [(comp.name, comp.healthy())]
        try:
            before = status.status().components[0].detail
            async with dial(comp.registration_socket, "pluginregistration", aio=True) as ch:
                await reg_grpc.RegistrationStub(ch).NotifyRegistrationStatus(
                    reg_pb.RegistrationStatus(plugin_registered=True))
            return before, status.status().components[0]
        finally:
            await comp.stop()

    before, after = asyncio.run(go())
    assert "not yet registered" in before
    assert after.name == "dra-kubeletplugin" and after.healthy
    assert after.detail.startswith(f"driver hwagent.io on {tmp_path / 'kubelet' / 'plugins' / 'hwagent.io' / 'dra.sock'}, "
                                   "registered")


def test_health_follows_the_health_board_and_the_rules(tmp_path: Path) -> None:
    """The real source: the devices component over a sysfs tree; a probe's mark on loop1 (the
    DEVICE_HEALTH board) and its clearing reach the stream, with the reason."""
    from agent.contracts import DEVICE_HEALTH
    from agent.devices.config import DevicesConfig, ResourceRule
    from agent.deviceplugin.plugins import DevicePluginsComponent
    from tests.unit.devices.fakesysfs import FakeSysfs

    fs = FakeSysfs(tmp_path / "sys")
    for i in range(2):
        fs.virtual_block(f"loop{i}", f"7:{i}")
    cfg = DevicesConfig(resources=(ResourceRule(name="example.com/scratch", block_name=("loop*",), api="dra"),),
                        default_rules=False, hotplug=False)
    devices = DevicePluginsComponent(cfg, sysfs_root=str(fs.root), plugin_dir=tmp_path / "dp",
                                     registration_socket=tmp_path / "dp" / "kubelet.sock")

    async def go():
        ctx = DaemonContext(section_defaults(), tmp_path / "root", synthetic(), mode="kubelet")
        await devices.start(ctx)
        comp = DRAKubeletPlugin("hwagent.io", tmp_path / "kubelet", "node-a", health_interval_s=0.05)
        await comp.start(ctx)
        board = ctx.lookup(DEVICE_HEALTH)
        try:
            async with dial(comp.dra_socket, "dra", aio=True) as ch:
                stream = h_grpc.DRAResourceHealthStub(ch).NodeWatchResources(hpb.NodeWatchResourcesRequest())
                first = await stream.read()
                assert board.set_health_for("block", "loop1", False, "4 I/O errors in 60 s", "kernel") == ["loop1"]
                sick = await stream.read()
                board.set_health_for("block", "7:1", True, "", "kernel")
                well = await stream.read()
                stream.cancel()
                return first, sick, well
        finally:
            await comp.stop()
            await devices.stop()

    first, sick, well = asyncio.run(go())

    def rows(resp):
        return [(d.device.device_name, hpb.HealthStatus.Name(d.health), d.message) for d in resp.devices]

    assert {d.device.pool_name for d in first.devices} == {"node-a/example.com/scratch"}
    assert rows(first) == [("loop0", "HEALTHY", ""), ("loop1", "HEALTHY", "")]
    assert rows(sick) == [("loop1", "UNHEALTHY", "kernel: 4 I/O errors in 60 s")]
    assert rows(well) == [("loop1", "HEALTHY", "")]
