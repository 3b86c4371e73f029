"""Restart from checkpoint and corrupt checkpoints, with real plugins."""

from __future__ import annotations

import json

import pytest
from prometheus_client import REGISTRY

from agent.devicemanager.checkpoint import decode
from agent.contracts.devices import ContainerRequest
from agent.devicemanager.selection import AllocationError
from tests.integration.devicemanager.fakeplugin import FakePlugin, dev
from tests.integration.devicemanager.harness import RES, RES2, host, run, until


def _corrupt_count() -> float:
    return REGISTRY.get_sample_value("hwagent_device_manager_checkpoint_errors_total", {"kind": "corrupt"}) or 0.0


def test_restart_restores_allocations_and_waits_for_the_plugin(sockdir):
    async def main():
        devices = [dev("a", numa=[0]), dev("b", numa=[1]), dev("c", numa=None)]
        async with host(sockdir) as h:
            p = FakePlugin(h.sock("p.sock"), devices)
            await p.start()
            await p.register(h.socket, RES)
            await until(lambda: h.cap() == (3, 3))
            first = await h.manager.allocate(
                ContainerRequest("pod-uid", "c", {RES: 2}, pod_namespace="ns", pod_name="web", hint=frozenset({1}))
            )
            await p.stop()
        raw = (sockdir / "dp" / "checkpoint").read_bytes()
        doc = json.loads(raw)
        assert doc["Version"] == 2 and doc["Checksum"].startswith("sha256:")
        entry = doc["Data"]["PodDeviceEntries"][0]
        assert entry["PodUID"] == "pod-uid" and entry["ResourceName"] == RES
        assert set(entry["DeviceIDs"]) <= {"0", "1", "-1"}

        async with host(sockdir, grace=60) as h:
            m = h.manager
            # restored: allocations known, the resource waits as a stopped endpoint with capacity 0
            assert [(a.pod_uid, a.device_ids) for a in m.allocations()] == [("pod-uid", first.devices(RES))]
            assert h.cap() == (0, 0)
            assert [e.state for e in m.endpoints()] == ["stopped"]
            assert m.run_options("pod-uid", "c").envs == first.run_options().envs
            # until the plugin is back its devices are not healthy: a restart is refused, as in the kubelet
            with pytest.raises(AllocationError, match="no longer healthy"):
                await m.allocate(ContainerRequest("pod-uid", "c", {RES: 2}))
            p = FakePlugin(h.sock("p.sock"), devices)
            await p.start()
            try:
                await p.register(h.socket, RES)
                await until(lambda: h.cap() == (3, 3))
                again = await m.allocate(ContainerRequest("pod-uid", "c", {RES: 2}))
                assert again.devices(RES) == first.devices(RES) and p.calls.allocate == []
                # the restored devices are not handed out again
                other = await m.allocate(ContainerRequest("pod-2", "c", {RES: 1}))
                assert not set(other.devices(RES)) & set(first.devices(RES))
                with pytest.raises(AllocationError, match="unavailable"):
                    await m.allocate(ContainerRequest("pod-3", "c", {RES: 1}))
            finally:
                await p.stop()

    run(main())


def test_restored_resource_is_deleted_after_grace_without_its_plugin(sockdir):
    async def main():
        async with host(sockdir) as h:
            p = FakePlugin(h.sock("p.sock"), [dev("a")])
            await p.start()
            await p.register(h.socket, RES2)
            await until(lambda: h.cap(RES2) == (1, 1))
            await p.stop()
        async with host(sockdir, grace=0.2) as h:
            assert h.cap(RES2) == (0, 0)
            await until(lambda: RES2 in h.manager.deleted_resources(), what="deleted after grace")
            assert h.cap(RES2) == (-1, -1)
            await h.manager.flush_checkpoint()
        data = decode((sockdir / "dp" / "checkpoint").read_bytes())
        assert RES2 in data.deleted and RES2 not in data.registered

    run(main())


@pytest.mark.parametrize(
    "mutate",
    [
        lambda raw: raw[: len(raw) // 2],  # truncated
        lambda raw: b"\x00\xff garbage",
        lambda raw: raw.replace(b'"pod-uid"', b'"pod-uiX"'),  # checksum no longer matches
        lambda raw: raw.replace(b'"Version":2', b'"Version":99'),
        lambda raw: b"",
    ],
    ids=["truncated", "garbage", "tampered", "future-version", "empty"],
)
def test_corrupt_checkpoint_is_set_aside_and_start_continues_empty(sockdir, mutate):
    async def main():
        async with host(sockdir) as h:
            p = FakePlugin(h.sock("p.sock"), [dev("a")])
            await p.start()
            await p.register(h.socket, RES)
            await until(lambda: h.cap() == (1, 1))
            await h.manager.allocate(ContainerRequest("pod-uid", "c", {RES: 1}))
            await p.stop()
        path = sockdir / "dp" / "checkpoint"
        bad = mutate(path.read_bytes())
        path.write_bytes(bad)
        before = _corrupt_count()
        async with host(sockdir) as h:
            assert h.manager.allocations() == []
            assert h.manager.endpoints() == []
            assert _corrupt_count() == before + 1
            aside = list((sockdir / "dp").glob("checkpoint.corrupt-*"))
            assert len(aside) == 1 and aside[0].read_bytes() == bad  # kept, never overwritten
            # the host works normally afterwards and writes a fresh, valid checkpoint
            p = FakePlugin(h.sock("p.sock"), [dev("a")])
            await p.start()
            try:
                await p.register(h.socket, RES)
                await until(lambda: h.cap() == (1, 1))
                await h.manager.allocate(ContainerRequest("pod-new", "c", {RES: 1}))
            finally:
                await p.stop()
        assert [a.pod_uid for a in decode(path.read_bytes()).allocations] == ["pod-new"]

    run(main())
