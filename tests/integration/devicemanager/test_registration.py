"""Registration over real gRPC: validation, hostile endpoints, health, disconnect, grace."""

from __future__ import annotations

import os
import socket
import stat

import grpc
import pytest
from prometheus_client import REGISTRY

from agent.contracts.devices import ContainerRequest
from agent.devicemanager.selection import AllocationError
from tests.integration.devicemanager.fakeplugin import FakePlugin, dev
from tests.integration.devicemanager.harness import RES, RES2, host, run, until


def _metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_register_reports_capacity_and_follows_snapshots(sockdir):
    """TestUpdateCapacityAllocatable over gRPC: every snapshot replaces the last."""

    async def main():
        async with host(sockdir) as h:
            p = FakePlugin(h.sock("p.sock"), [dev("a"), dev("b"), dev("c", healthy=False)])
            await p.start()
            try:
                before = _metric("hwagent_device_plugin_registration_total", resource=RES)
                await p.register(h.socket, RES)
                assert _metric("hwagent_device_plugin_registration_total", resource=RES) == before + 1
                await until(lambda: h.cap() == (3, 2), what="3/2")
                p.update([dev("a"), dev("b")])  # the unhealthy one vanished: gone, not unhealthy
                await until(lambda: h.cap() == (2, 2), what="2/2")
                p.update([dev("a"), dev("b", healthy=False), dev("c")])
                await until(lambda: h.cap() == (3, 2))
                p.update([dev("a", healthy=False)])
                await until(lambda: h.cap() == (1, 0))
                # anything that is not exactly "Healthy" is unhealthy
                odd = dev("z")
                odd.health = "healthy"
                p.update([odd, dev("y")])
                await until(lambda: h.cap() == (2, 1))
                assert _metric("hwagent_device_plugin_capacity_devices", resource=RES) == 2
                assert _metric("hwagent_device_plugin_allocatable_devices", resource=RES) == 1
                assert _metric("hwagent_device_plugin_endpoints", resource=RES, state="connected") == 1
            finally:
                await p.stop()

    run(main())


@pytest.mark.parametrize(
    "version,resource,code,fragment",
    [
        ("v1alpha", RES, grpc.StatusCode.INVALID_ARGUMENT, "not supported"),
        ("", RES, grpc.StatusCode.INVALID_ARGUMENT, "not supported"),
        ("v1beta1", "gpu", grpc.StatusCode.INVALID_ARGUMENT, "ResourceName"),
        ("v1beta1", "kubernetes.io/foo", grpc.StatusCode.INVALID_ARGUMENT, "ResourceName"),
        ("v1beta1", "requests.example.com/x", grpc.StatusCode.INVALID_ARGUMENT, "ResourceName"),
        ("v1beta1", "Example.com/x", grpc.StatusCode.INVALID_ARGUMENT, "ResourceName"),
    ],
)
def test_register_validation(sockdir, version, resource, code, fragment):
    async def main():
        async with host(sockdir) as h:
            p = FakePlugin(h.sock("p.sock"), [dev("a")])
            await p.start()
            try:
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await p.register(h.socket, resource, version=version)
                assert e.value.code() == code
                assert fragment in e.value.details()
                assert h.manager.endpoints() == []
                assert p.calls.list_and_watch == 0
            finally:
                await p.stop()

    run(main())


def test_register_fails_synchronously_when_plugin_cannot_answer(sockdir):
    async def main():
        async with host(sockdir, dial_timeout=0.5) as h:
            p = FakePlugin(h.sock("p.sock"), [dev("a")])
            p.fail.options = grpc.StatusCode.INTERNAL
            await p.start()
            try:
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await p.register(h.socket, RES)
                assert e.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "failed to get device plugin options" in e.value.details()
                assert h.manager.endpoints() == []
            finally:
                await p.stop()
            # a socket nobody listens on: the dial fails, the call says so
            dead = socket.socket(socket.AF_UNIX)
            dead.bind(h.sock("dead.sock"))
            dead.close()
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await FakePlugin(h.sock("dead.sock"), []).register(h.socket, RES)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE

    run(main(), timeout=30)


def test_hostile_endpoint_names_are_rejected(sockdir):
    outside = sockdir / "outside.sock"

    async def main():
        async with host(sockdir) as h:
            real = FakePlugin(str(outside), [dev("a")])
            await real.start()
            (h.plugins_dir / "regular").write_text("x")
            (h.plugins_dir / "subdir").mkdir()
            os.symlink(outside, h.plugins_dir / "link.sock")
            os.link(outside, h.plugins_dir / "hard.sock")  # a hard link to a socket outside the dir
            cases = {
                "../outside.sock": grpc.StatusCode.INVALID_ARGUMENT,
                str(outside): grpc.StatusCode.INVALID_ARGUMENT,
                "subdir/../../outside.sock": grpc.StatusCode.INVALID_ARGUMENT,
                "..": grpc.StatusCode.INVALID_ARGUMENT,
                ".": grpc.StatusCode.INVALID_ARGUMENT,
                "": grpc.StatusCode.INVALID_ARGUMENT,
                "p\x00.sock": grpc.StatusCode.INVALID_ARGUMENT,
                "registration.sock": grpc.StatusCode.INVALID_ARGUMENT,  # the host's own socket
                "checkpoint": grpc.StatusCode.INVALID_ARGUMENT,
                "x" * 300: grpc.StatusCode.INVALID_ARGUMENT,
                "link.sock": grpc.StatusCode.FAILED_PRECONDITION,  # a symlink out of the dir
                "hard.sock": grpc.StatusCode.FAILED_PRECONDITION,  # the same inode as outside.sock
                "regular": grpc.StatusCode.FAILED_PRECONDITION,
                "subdir": grpc.StatusCode.FAILED_PRECONDITION,
                "missing.sock": grpc.StatusCode.FAILED_PRECONDITION,
            }
            try:
                for endpoint, code in cases.items():
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await real.register(h.socket, RES, endpoint=endpoint)
                    assert e.value.code() == code, (endpoint, e.value.details())
                assert h.manager.endpoints() == []
                assert real.calls.list_and_watch == 0  # never dialled
                assert _metric("hwagent_device_plugin_registration_total", resource="_invalid_") >= 0
            finally:
                await real.stop()

    run(main())


def test_registration_socket_is_owner_only_and_stale_sockets_are_cleaned(sockdir):
    async def main():
        plugins = sockdir / "dp"
        plugins.mkdir()
        os.chmod(plugins, 0o750)
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(str(plugins / "stale.sock"))
        stale.close()
        (plugins / "keep.txt").write_text("not a socket")
        async with host(sockdir) as h:
            assert not (plugins / "stale.sock").exists()
            assert (plugins / "keep.txt").read_text() == "not a socket"
            assert stat.S_IMODE(os.stat(h.socket).st_mode) == 0o600
            assert stat.S_IMODE(os.stat(plugins).st_mode) == 0o750  # an existing dir keeps its mode
        assert not os.path.exists(plugins / "registration.sock")

    run(main())


def test_hard_link_is_refused_with_a_message_and_bounded_fields_are_checked_first(sockdir):
    outside = sockdir / "outside.sock"

    async def main():
        async with host(sockdir) as h:
            real = FakePlugin(str(outside), [dev("a")])
            await real.start()
            os.link(outside, h.plugins_dir / "hard.sock")
            try:
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await real.register(h.socket, RES, endpoint="hard.sock")
                assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
                assert "hard link" in e.value.details()
                # oversized fields are refused without being echoed back
                for kw in ({"version": "v" * 10_000}, {"endpoint": "e" * 10_000}):
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await real.register(h.socket, RES, **kw)
                    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                    assert len(e.value.details()) < 300, e.value.details()
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await real.register(h.socket, "example.com/" + "r" * 10_000)
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and len(e.value.details()) < 300
                # a body over the Registration server's limit never reaches the servicer
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await real.register(h.socket, RES, endpoint="e" * 1_000_000)
                assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert h.manager.endpoints() == [] and real.calls.list_and_watch == 0
            finally:
                await real.stop()

    run(main())


def test_live_reregistration_replaces_the_endpoint_like_the_kubelet(sockdir):
    """A plugin that registers again on the same socket (after its own restart, or
    just twice) gets the new registration; the old stream is closed, health is kept."""

    async def main():
        async with host(sockdir) as h:
            p1 = FakePlugin(h.sock("p1.sock"), [dev("a"), dev("b")])
            await p1.start()
            try:
                await p1.register(h.socket, RES)
                await until(lambda: h.cap() == (2, 2) and len(p1._streams) == 1)
                await p1.register(h.socket, RES)  # accepted, not ALREADY_EXISTS
                await until(lambda: p1.calls.list_and_watch == 2 and len(p1._streams) == 1,
                            what="old stream closed, new one open")
                assert [(e.socket.rsplit("/", 1)[1], e.state) for e in h.manager.endpoints()] == [
                    ("p1.sock", "connected")]
                assert h.cap() == (2, 2)
                p1.update([dev("a"), dev("b"), dev("c")])  # the new stream is the one listened to
                await until(lambda: h.cap() == (3, 3))
                await h.manager.allocate(ContainerRequest("pod", "c", {RES: 1}))
                assert len(p1.calls.allocate) == 1
                # the plugin restarts its server on the same path and registers again
                await p1.stop()
                p1b = FakePlugin(h.sock("p1.sock"), [dev("a"), dev("b"), dev("c")])
                await p1b.start()
                try:
                    await p1b.register(h.socket, RES)
                    await until(lambda: h.cap() == (3, 3) and p1b.calls.list_and_watch == 1)
                    assert [e.state for e in h.manager.endpoints()] == ["connected"]
                    # a failed re-registration changes nothing: the endpoint stays
                    p1b.fail.options = grpc.StatusCode.UNAVAILABLE
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await p1b.register(h.socket, RES)
                    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
                    assert [e.state for e in h.manager.endpoints()] == ["connected"] and h.cap() == (3, 3)
                    await h.manager.allocate(ContainerRequest("pod2", "c", {RES: 1}))
                    assert len(p1b.calls.allocate) == 1
                finally:
                    await p1b.stop()
            finally:
                await p1.stop()

    run(main())


def test_same_socket_replaced_other_sockets_coexist_last_snapshot_wins(sockdir):
    """TestDevicePluginReRegistration (2 -> 2 -> 1) and the same-socket replacement."""

    async def main():
        async with host(sockdir) as h:
            p1 = FakePlugin(h.sock("p1.sock"), [dev("a"), dev("b")])
            p2 = FakePlugin(h.sock("p2.sock"), [dev("a"), dev("b")])
            p3 = FakePlugin(h.sock("p3.sock"), [dev("a")])
            for p in (p1, p2, p3):
                await p.start()
            try:
                await p1.register(h.socket, RES)
                await until(lambda: h.cap() == (2, 2))
                await p1.register(h.socket, RES)  # the same pair again replaces, as the kubelet does
                await until(lambda: p1.calls.list_and_watch == 2)
                await p2.register(h.socket, RES)
                await until(lambda: p2.calls.list_and_watch == 1)
                assert h.cap() == (2, 2)
                await p3.register(h.socket, RES)
                await until(lambda: h.cap() == (1, 1), what="p3 snapshot replaces")
                states = [(e.socket.rsplit("/", 1)[1], e.state) for e in h.manager.endpoints()]
                assert states == [("p1.sock", "connected"), ("p2.sock", "connected"), ("p3.sock", "connected")]
                # the primary (last connected) serves Allocate
                await h.manager.allocate(ContainerRequest("pod", "c", {RES: 1}))
                assert p3.calls.allocate == [["a"]] and not p1.calls.allocate
                # the primary goes away: a survivor is promoted, devices stay healthy
                await p3.stop()
                await until(lambda: len(h.manager.endpoints()) == 2, what="p3 dropped")
                assert h.cap() == (1, 1)
                await h.manager.allocate(ContainerRequest("pod2", "c", {RES: 0}))
                p2.update([dev("a"), dev("b")])
                await until(lambda: h.cap() == (2, 2))
                await h.manager.allocate(ContainerRequest("pod3", "c", {RES: 1}))
                assert p2.calls.allocate == [["b"]]
            finally:
                for p in (p1, p2, p3):
                    await p.stop()

    run(main())


def test_disconnect_marks_unhealthy_then_grace_deletes(sockdir):
    async def main():
        async with host(sockdir, grace=0.5) as h:
            p = FakePlugin(h.sock("p.sock"), [dev("a"), dev("b"), dev("c")], pre_start_required=True)
            await p.start()
            await p.register(h.socket, RES)
            await until(lambda: h.cap() == (3, 3))
            await h.manager.allocate(ContainerRequest("pod", "c", {RES: 1}))
            await p.stop()
            await until(lambda: h.cap() == (3, 0), what="capacity kept, allocatable 0")
            assert [(e.state) for e in h.manager.endpoints()] == ["stopped"]
            assert _metric("hwagent_device_plugin_endpoints", resource=RES, state="stopped") == 1
            # calls to the stopped endpoint fail clearly
            with pytest.raises(AllocationError, match="has been stopped"):
                await h.manager.pre_start("pod", "c")
            with pytest.raises(AllocationError, match="no healthy devices"):
                await h.manager.allocate(ContainerRequest("pod2", "c", {RES: 1}))
            cap, _, deleted = h.manager.capacity()
            assert RES in cap and deleted == []
            await until(lambda: RES in h.manager.deleted_resources(), timeout=5, what="grace expiry")
            cap, alloc, _ = h.manager.capacity()
            assert RES not in cap and RES not in alloc
            assert h.manager.endpoints() == []
            assert REGISTRY.get_sample_value("hwagent_device_plugin_capacity_devices", {"resource": RES}) is None
            with pytest.raises(AllocationError, match="unregistered"):
                await h.manager.allocate(ContainerRequest("pod3", "c", {RES: 1}))

    run(main())


def test_grace_expiry_is_reported_by_capacity(sockdir):
    async def main():
        async with host(sockdir, grace=0.2) as h:
            h.manager._expiry_task.cancel()  # only the lazy check in capacity() remains
            p = FakePlugin(h.sock("p.sock"), [dev("a")])
            await p.start()
            await p.register(h.socket, RES2)
            await until(lambda: h.cap(RES2) == (1, 1))
            await p.stop()
            await until(lambda: h.cap(RES2) == (1, 0))
            import asyncio

            await asyncio.sleep(0.3)
            cap, _, deleted = h.manager.capacity()
            assert deleted == [RES2] and RES2 not in cap
            assert h.manager.capacity()[2] == []  # reported once

    run(main())


def test_reregistration_after_disconnect_restores_health(sockdir):
    async def main():
        async with host(sockdir, grace=60) as h:
            p = FakePlugin(h.sock("p.sock"), [dev("a"), dev("b")])
            await p.start()
            await p.register(h.socket, RES)
            await until(lambda: h.cap() == (2, 2))
            await p.stop()
            await until(lambda: h.cap() == (2, 0))
            p2 = FakePlugin(h.sock("p.sock"), [dev("a"), dev("b"), dev("c")])
            await p2.start()
            try:
                await p2.register(h.socket, RES)
                await until(lambda: h.cap() == (3, 3))
                assert [e.state for e in h.manager.endpoints()] == ["connected"]
                a = await h.manager.allocate(ContainerRequest("pod", "c", {RES: 2}))
                assert len(a.devices(RES)) == 2 and p2.calls.allocate
            finally:
                await p2.stop()

    run(main())
