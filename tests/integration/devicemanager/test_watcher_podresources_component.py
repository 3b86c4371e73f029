"""Plugin-watcher registration, the pod-resources v1 server and the daemon component."""

from __future__ import annotations

import json
import logging
import os
import socket
import stat

import grpc
import pytest

from agent.contracts import ACTIVE_PODS, DEVICE_MANAGER
from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.api.podresources.v1 import api_pb2 as pr
from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc
from agent.cli import main as cli_main
from agent.contracts import DaemonContext
from agent.config import section_defaults
from agent.devicemanager.component import DeviceManagerComponent, factory
from agent.contracts.devices import ContainerRequest
from agent.devicemanager.watcher import PluginWatcher
from agent.pods import StaticActivePods
from agent.topology.model import synthetic
from tests.integration.devicemanager.fakeplugin import FakePlugin, WatcherRegistration, dev
from tests.integration.devicemanager.harness import RES, host, run, until


def _info(name=RES, endpoint="", versions=("v1beta1",), type_="DevicePlugin"):
    return reg_pb.PluginInfo(type=type_, name=name, endpoint=endpoint, supported_versions=list(versions))


def test_plugin_watcher_registers_notifies_and_deregisters(sockdir):
    async def main():
        registry = sockdir / "reg"
        registry.mkdir()
        async with host(sockdir, grace=60) as h:
            w = PluginWatcher(h.manager, registry, poll_seconds=0.05, dial_timeout=2)
            await w.start()
            plugin = FakePlugin(h.sock("dp-plugin.sock"), [dev("a"), dev("b")])
            await plugin.start()
            good = WatcherRegistration(str(registry / "good.sock"), _info(endpoint=plugin.socket_path))
            bad_version = WatcherRegistration(str(registry / "old.sock"), _info(name="example.com/old", versions=("v1alpha",)))
            csi = WatcherRegistration(str(registry / "csi.sock"), _info(type_="CSIPlugin", name="csi.example.com"))
            sneaky = WatcherRegistration(
                str(registry / "sneaky.sock"), _info(name="example.com/sneaky", endpoint=f"{registry}/../dp/dp-plugin.sock")
            )
            for r in (good, bad_version, csi, sneaky):
                await r.start()
            try:
                await until(lambda: h.cap() == (2, 2), what="watcher registration")
                await until(lambda: good.notified == [(True, "")])
                await until(lambda: bad_version.notified and csi.notified and sneaky.notified)
                assert bad_version.notified[0][0] is False and "v1beta1" in bad_version.notified[0][1]
                assert csi.notified[0][0] is False and "not handled" in csi.notified[0][1]
                assert sneaky.notified[0][0] is False and "normalized" in sneaky.notified[0][1]
                assert [e.resource for e in h.manager.endpoints()] == [RES]
                # the registration socket goes: the endpoint is dropped
                await good.stop()
                await until(lambda: h.cap() == (2, 0), what="deregistered on socket removal")
                assert [e.state for e in h.manager.endpoints()] == ["stopped"]
            finally:
                for r in (bad_version, csi, sneaky):
                    await r.stop()
                await plugin.stop()
                await w.stop()

    run(main())


def test_plugin_watcher_default_endpoint_and_failed_notify(sockdir):
    """No endpoint in GetInfo: the registration socket serves DevicePlugin too.
    A failed NotifyRegistrationStatus undoes the registration."""

    async def main():
        registry = sockdir / "reg"
        registry.mkdir()
        async with host(sockdir) as h:
            # one gRPC server serving both services on one socket
            plugin = FakePlugin(str(registry / "both.sock"), [dev("a")])
            reg = WatcherRegistration(str(registry / "unused"), _info())
            server = grpc.aio.server()
            from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
            from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc

            pb_grpc.add_DevicePluginServicer_to_server(plugin, server)
            reg_grpc.add_RegistrationServicer_to_server(reg, server)
            server.add_insecure_port(f"unix:{registry / 'both.sock'}")
            await server.start()
            w = PluginWatcher(h.manager, registry, poll_seconds=0.05, dial_timeout=2)
            try:
                await w.scan()
                await until(lambda: h.cap() == (1, 1))
                assert h.manager.endpoints()[0].socket == str(registry / "both.sock")
                # now a plugin whose Notify fails
                failing = WatcherRegistration(str(registry / "f.sock"), _info(name="example.com/f", endpoint=str(registry / "both.sock")), fail_notify=True)
                await failing.start()
                await w.scan()
                assert failing.notified == [(True, "")]
                states = [(e.resource, e.state) for e in h.manager.endpoints()]
                assert states == [("example.com/f", "stopped"), (RES, "connected")]
                await failing.stop()
            finally:
                await server.stop(None)

    run(main())


def test_pod_resources_list_get_allocatable(sockdir):
    async def main():
        active = StaticActivePods({"uid-1", "uid-2"})
        root = sockdir / "root"
        cfg = section_defaults()
        ctx = DaemonContext(config=cfg, root_dir=root, topology=synthetic(sockets=2, numa_per_socket=1, cores_per_numa=2),
                            mode="standalone")
        ctx.publish(ACTIVE_PODS, active)
        comp = factory(ctx)
        assert isinstance(comp, DeviceManagerComponent)
        await comp.start(ctx)
        try:
            m = ctx.lookup(DEVICE_MANAGER)
            reg_sock = root / "device-plugins" / "registration.sock"
            assert stat.S_IMODE(os.stat(reg_sock).st_mode) == 0o600
            # directories the component had to create itself are owner-only
            for d in ("device-plugins", "plugins_registry", "pod-resources"):
                assert stat.S_IMODE(os.stat(root / d).st_mode) == 0o700, d
            assert stat.S_IMODE(os.stat(root / "pod-resources" / "pod-resources.sock").st_mode) == 0o600
            p = FakePlugin(str(root / "device-plugins" / "p.sock"), [dev("a", numa=[0]), dev("b", numa=[0, 1]), dev("c", numa=None), dev("u", healthy=False, numa=[1])])
            await p.start()
            await p.register(str(reg_sock), RES)
            await until(lambda: m.capacity()[0].get(RES) == 4)
            await m.allocate(ContainerRequest("uid-1", "main", {RES: 2}, pod_namespace="ns", pod_name="web", hint=frozenset({0})))
            await m.allocate(ContainerRequest("uid-2", "side", {RES: 1}, pod_namespace="ns", pod_name="db"))
            assert comp.healthy()
            async with grpc.aio.insecure_channel(f"unix://{root / 'pod-resources' / 'pod-resources.sock'}") as ch:
                stub = pr_grpc.PodResourcesListerStub(ch)
                listed = await stub.List(pr.ListPodResourcesRequest())
                pods = {(x.namespace, x.name): x for x in listed.pod_resources}
                assert set(pods) == {("ns", "web"), ("ns", "db")}
                web = pods[("ns", "web")].containers[0]
                assert web.name == "main"
                # one entry per device per NUMA node, as the kubelet reports it
                pairs = sorted((d.device_ids[0], tuple(n.ID for n in d.topology.nodes)) for d in web.devices)
                assert pairs == [("a", (0,)), ("b", (0,)), ("b", (1,))]
                db = pods[("ns", "db")].containers[0]
                assert [(d.device_ids[0], d.HasField("topology")) for d in db.devices] == [("c", False)]
                got = await stub.Get(pr.GetPodResourcesRequest(pod_name="web", pod_namespace="ns"))
                assert got.pod_resources.containers[0].name == "main"
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await stub.Get(pr.GetPodResourcesRequest(pod_name="nope", pod_namespace="ns"))
                assert e.value.code() == grpc.StatusCode.NOT_FOUND
                assert "pod nope in namespace ns not found" in e.value.details()
                # over-long names are invalid, not echoed back as "not found"; bodies over the limit never decode
                for kw in ({"pod_name": "n" * 254, "pod_namespace": "ns"}, {"pod_name": "w", "pod_namespace": "s" * 64}):
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await stub.Get(pr.GetPodResourcesRequest(**kw))
                    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and len(e.value.details()) < 300
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await stub.Get(pr.GetPodResourcesRequest(pod_name="n" * 100_000))
                assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                alloc = await stub.GetAllocatableResources(pr.AllocatableResourcesRequest())
                # every healthy device, allocated or not; never the unhealthy one
                assert sorted({d.device_ids[0] for d in alloc.devices}) == ["a", "b", "c"]
                # a pod that is no longer active disappears from List
                active.remove("uid-2")
                listed = await stub.List(pr.ListPodResourcesRequest())
                assert [x.name for x in listed.pod_resources] == ["web"]
            await p.stop()
        finally:
            await comp.stop()
            await comp.stop()  # stop twice is fine
        assert not (root / "pod-resources" / "pod-resources.sock").exists()
        assert not (root / "device-plugins" / "registration.sock").exists()

        # `hwagent resources` reads what the host left behind
        return root

    root = run(main())
    assert cli_main(["resources", "--root-dir", str(root), "--format", "json"]) == 0


def test_cli_resources_output(sockdir, capsys):
    async def main():
        async with host(sockdir) as h:
            p = FakePlugin(h.sock("p.sock"), [dev("a", numa=[0]), dev("u", healthy=False, numa=[1])])
            await p.start()
            await p.register(h.socket, RES)
            await until(lambda: h.cap() == (2, 1))
            await h.manager.allocate(ContainerRequest("uid", "main", {RES: 1}, pod_namespace="ns", pod_name="web"))
            await p.stop()
            # the host learns of the plugin's end from its ListAndWatch stream; a host stopped
            # before that (a loaded machine) checkpoints the devices as they were
            await until(lambda: h.cap() == (2, 0))

    run(main())
    cp = str(sockdir / "dp" / "checkpoint")
    assert cli_main(["resources", "--checkpoint", cp, "--format", "json"]) == 0
    view = json.loads(capsys.readouterr().out)
    r = view["resources"][RES]
    assert (r["capacity"], r["allocatable"], r["allocated"]) == (2, 0, 1)  # plugin gone: all unhealthy
    assert r["endpoints"][0]["state"] == "stopped"
    assert view["allocations"][0]["pod"] == "web" and view["allocations"][0]["devices"] == ["a"]
    assert cli_main(["resources", "--checkpoint", cp]) == 0
    text = capsys.readouterr().out
    assert "example.com/fake  capacity=2 allocatable=0 allocated=1" in text and "ns/web main (app)" in text
    assert cli_main(["resources", "--checkpoint", str(sockdir / "missing")]) != 0
    (sockdir / "bad").write_text("{}")
    assert cli_main(["resources", "--checkpoint", str(sockdir / "bad")]) != 0
    assert "corrupt checkpoint" in capsys.readouterr().err


def test_factory_follows_mode_and_config(sockdir, caplog):
    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=1)
    cfg = section_defaults()
    with caplog.at_level(logging.INFO, logger="hwagent.devicemanager"):
        assert factory(DaemonContext(config=cfg, root_dir=sockdir, topology=topo, mode="kubelet")) is None
    assert any(r.getMessage() == "devicemanager disabled" and r.fields["mode"] == "kubelet" for r in caplog.records)
    off = cfg.replace("devicemanager", enabled=False)
    assert factory(DaemonContext(config=off, root_dir=sockdir, topology=topo, mode="standalone")) is None
    assert factory(DaemonContext(config=cfg, root_dir=sockdir, topology=topo, mode="standalone")) is not None


def test_component_cleans_only_stale_sockets(sockdir):
    root = sockdir / "root"
    plugins = root / "device-plugins"
    plugins.mkdir(parents=True)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(plugins / "old-plugin.sock"))
    s.close()
    (plugins / "notes.txt").write_text("keep")

    async def main():
        ctx = DaemonContext(config=section_defaults(), root_dir=root,
                            topology=synthetic(sockets=1, numa_per_socket=1, cores_per_numa=1), mode="standalone")
        comp = factory(ctx)
        await comp.start(ctx)
        try:
            assert not (plugins / "old-plugin.sock").exists()
            assert (plugins / "notes.txt").read_text() == "keep"
        finally:
            await comp.stop()

    run(main())


def test_pod_resources_joins_cpu_ids_from_the_cpu_policy(sockdir):
    """CPU ids come from the CPU policy's records (``CPUAllocations``) when it runs."""
    from dataclasses import dataclass

    from agent.cpuset import CPUSet
    from agent.podresources.server import PodResourcesServicer

    @dataclass
    class Rec:
        pod_uid: str
        pod_namespace: str
        pod_name: str
        container_name: str
        cpuset: CPUSet

    class CPUPolicy:
        def allocations(self):
            return [Rec("uid-1", "ns", "web", "main", CPUSet.parse("2-3,8")),
                    Rec("uid-9", "ns", "cpu-only", "c", CPUSet.parse("5"))]

    async def main():
        async with host(sockdir) as h:
            p = FakePlugin(h.sock("p.sock"), [dev("a")])
            await p.start()
            try:
                await p.register(h.socket, RES)
                await until(lambda: h.cap() == (1, 1))
                await h.manager.allocate(ContainerRequest("uid-1", "main", {RES: 1}, pod_namespace="ns", pod_name="web"))
                cpu = CPUPolicy()
                server = grpc.aio.server()
                servicer = PodResourcesServicer(devices=lambda: h.manager, cpus=lambda: cpu)
                pr_grpc.add_PodResourcesListerServicer_to_server(servicer, server)
                server.add_insecure_port(f"unix:{sockdir / 'pr.sock'}")
                await server.start()
                try:
                    async with grpc.aio.insecure_channel(f"unix://{sockdir / 'pr.sock'}") as ch:
                        listed = await pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest())
                finally:
                    await server.stop(None)
                pods = {x.name: x for x in listed.pod_resources}
                web = pods["web"].containers[0]
                assert list(web.cpu_ids) == [2, 3, 8] and [d.device_ids[0] for d in web.devices] == ["a"]
                assert list(pods["cpu-only"].containers[0].cpu_ids) == [5]
            finally:
                await p.stop()

    run(main())
