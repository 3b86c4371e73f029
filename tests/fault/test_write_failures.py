"""Injected write failures (issue 10, defect 1): a call whose change cannot be
made durable returns UNAVAILABLE and leaves the policy's and the device
host's memory and files exactly as before; reads keep working while the disk
says no; once the disk is back, calls succeed and a restart sees exactly what
was acknowledged. Real full tmpfs for ENOSPC, a patched writer for EIO/EMFILE."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import grpc
import pytest
from prometheus_client import REGISTRY

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.cpu.checkpoint import CheckpointStore
from agent.devicemanager.checkpoint import load as load_devices
from agent.devicemanager.manager import DeviceManager
from agent.contracts.devices import ContainerRequest
from agent.contracts.devices import Device
from agent.devicemanager.selection import AllocationError

try:
    from ._durable_helpers import (ONLINE, CPUServer, FailingIO, InProcessPlugin, cpu_request, files, fill, run,
                                   tmpfs)
except ImportError:  # collected without a package
    from _durable_helpers import ONLINE, CPUServer, FailingIO, InProcessPlugin, cpu_request, files, fill, run, tmpfs

pytestmark = [pytest.mark.fault, pytest.mark.root]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")


def _alloc_of(resp) -> str:
    return resp.allocation_result.resource_allocation["cpu"].allocation_result


@needs_root
def test_cpu_calls_on_a_full_disk_change_nothing_and_reads_keep_working():
    async def main():
        with tmpfs("256k") as d:
            async with CPUServer(d) as s:
                a = await s.stub.Allocate(cpu_request("a", "dedicated_cores", 2, hint=[0]))
                await s.stub.Allocate(cpu_request("sh", cpus=0.5))
                filler = fill(d)
                # the journal's last page may still hold a record or two: fill it with calls until one fails
                for i in range(64):
                    before_state, before_files = s.policy.state, files(d)
                    try:
                        await s.stub.Allocate(cpu_request(f"fill-{i}", cpus=0.1))
                    except grpc.aio.AioRpcError as e:
                        err = e
                        break
                else:
                    raise AssertionError("a full tmpfs never refused a record")
                assert err.code() == grpc.StatusCode.UNAVAILABLE
                assert "No space left" in err.details() and "nothing was changed" in err.details()
                with pytest.raises(grpc.aio.AioRpcError) as e:  # a larger record: refused as well
                    await s.stub.Allocate(cpu_request("b", "dedicated_cores", 2, hint=[1]))
                assert e.value.code() == grpc.StatusCode.UNAVAILABLE
                assert s.policy.state == before_state and files(d) == before_files
                # reads never wait for a write: served while the disk is full
                got = await s.stub.GetResourcesAllocation(pb.GetResourcesAllocationRequest())
                assert {"a", "sh"} <= set(got.pod_resources) and "b" not in got.pod_resources
                assert f"fill-{i}" not in got.pod_resources
                h = await s.stub.GetTopologyHints(cpu_request("b", "dedicated_cores", 2))
                assert h.resource_hints["cpu"].hints
                # a repeated Allocate of what is already durable is answered too
                assert _alloc_of(await s.stub.Allocate(cpu_request("a", "dedicated_cores", 2, hint=[0]))) \
                    == _alloc_of(a)
                filler.unlink()
                b = await s.stub.Allocate(cpu_request("b", "dedicated_cores", 2, hint=[1]))
                assert _alloc_of(b)
                want = s.policy.state
            restored = CheckpointStore(d, online=ONLINE).load()
            assert restored is not None and restored.entries == want.entries and restored.pools == want.pools

    run(main())


@pytest.mark.parametrize("call,err,truncate_fails", [
    ("sync", errno.EIO, False),
    ("write", errno.EMFILE, False),
    ("write", errno.ENOSPC, False),
    ("write", errno.EIO, True),  # even the cut-back fails: the next success rewrites the snapshot
])
def test_cpu_injected_write_errors_fail_every_call_of_the_batch_and_restore_memory(
        tmp_path, monkeypatch, call, err, truncate_fails):
    async def main():
        async with CPUServer(tmp_path) as s:
            await s.stub.Allocate(cpu_request("keep", "dedicated_cores", 2, hint=[0]))
            before_state, before_files = s.policy.state, files(tmp_path)
            fail = FailingIO(monkeypatch, tmp_path, call, err, truncate_fails)
            fail.active = True
            reqs = [cpu_request(f"p{i}", "dedicated_cores" if i % 2 else None, 1, hint=[1] if i % 2 else None)
                    for i in range(8)]  # fmt: skip
            results = await asyncio.gather(*(s.stub.Allocate(r) for r in reqs), return_exceptions=True)
            assert all(isinstance(r, grpc.aio.AioRpcError) and r.code() == grpc.StatusCode.UNAVAILABLE
                       for r in results), results
            assert os.strerror(err) in results[0].details()
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await s.stub.RemovePod(pb.RemovePodRequest(pod_uid="keep"))
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE
            assert fail.hits >= 1
            assert s.policy.state == before_state
            if not truncate_fails:
                assert files(tmp_path) == before_files
            fail.active = False
            ok = await asyncio.gather(*(s.stub.Allocate(r) for r in reqs))
            assert all(_alloc_of(r) for r in ok)
            want = s.policy.state
        restored = CheckpointStore(tmp_path, online=ONLINE).load()
        assert restored.entries == want.entries and restored.pools == want.pools

    run(main())


def test_old_engine_flaw_is_gone_failed_change_is_not_persisted_by_the_next_write(tmp_path, monkeypatch):
    """The defect as reported: the failed pod stayed in memory and the next
    successful write persisted it. Now it is neither in memory nor on disk."""
    async def main():
        async with CPUServer(tmp_path) as s:
            fail = FailingIO(monkeypatch, tmp_path, "sync", errno.EIO)
            fail.active = True
            with pytest.raises(grpc.aio.AioRpcError):
                await s.stub.Allocate(cpu_request("ghost", cpus=1))
            fail.active = False
            await s.stub.Allocate(cpu_request("real", cpus=1))
            assert s.policy.state.get("ghost", "c") is None
        restored = CheckpointStore(tmp_path, online=ONLINE).load()
        assert set(restored.entries) == {"real"}

    run(main())


RES = "example.com/dev"


def _devices() -> list[Device]:
    return [Device(f"d{n}-{i}", True, (n,)) for n in range(2) for i in range(4)]


async def _host(path):
    m = DeviceManager(numa_ids=(0, 1), checkpoint_path=path)
    await m.start()
    m.attach(InProcessPlugin(RES, _devices()))
    return m


def _held(m: DeviceManager) -> dict:
    return {(a.pod_uid, a.container_name): a.device_ids for a in m.allocations()}


def _on_disk(cp: Path) -> dict:
    """What the checkpoint file holds, keyed as ``_held``."""
    return {(a.pod_uid, a.container_name): a.device_ids for a in load_devices(cp).allocations}


@pytest.mark.parametrize("call,err", [("sync", errno.EIO), ("write", errno.EMFILE)])
def test_device_allocate_write_error_changes_nothing(tmp_path, monkeypatch, call, err):
    cp = tmp_path / "checkpoint"

    async def main():
        m = await _host(cp)
        try:
            await m.allocate(ContainerRequest("keep", "c", {RES: 2}, hint=frozenset({0})))
            await m.journal_drain()
            before, before_files = _held(m), files(tmp_path)
            fail = FailingIO(monkeypatch, tmp_path, call, err)
            fail.active = True
            writes0 = REGISTRY.get_sample_value("hwagent_device_manager_checkpoint_errors_total", {"kind": "write"}) or 0
            results = await asyncio.gather(
                *(m.allocate(ContainerRequest(f"p{i}", "c", {RES: 1})) for i in range(4)), return_exceptions=True)
            assert all(isinstance(r, AllocationError) and r.code == "UNAVAILABLE" for r in results), results
            assert REGISTRY.get_sample_value("hwagent_device_manager_checkpoint_errors_total",
                                             {"kind": "write"}) == writes0 + 4
            assert _held(m) == before and files(tmp_path) == before_files
            # pod-resources style reads keep working
            assert m.container_allocations("keep")["c"][0].device_ids == before[("keep", "c")]
            assert m.topology_hints("x", "c", {RES: 2})[RES]
            fail.active = False
            got = await asyncio.gather(*(m.allocate(ContainerRequest(f"p{i}", "c", {RES: 1})) for i in range(6)))
            assert len({d for g in got for d in g.devices(RES)}) == 6  # the undone devices are free again
            want = _held(m)
        finally:
            await m.stop()
        assert _on_disk(cp) == want

    run(main())


@needs_root
def test_device_host_on_a_full_disk():
    async def main():
        with tmpfs("256k") as d:
            cp = d / "checkpoint"
            m = await _host(cp)
            try:
                await m.allocate(ContainerRequest("keep", "c", {RES: 1}))
                await m.journal_drain()
                before = _held(m)
                filler = fill(d)
                before_files = files(d)
                with pytest.raises(AllocationError) as e:
                    await m.allocate(ContainerRequest("new", "c", {RES: 1}))
                assert e.value.code == "UNAVAILABLE" and "No space left" in str(e.value)
                assert _held(m) == before and files(d) == before_files
                filler.unlink()
                await m.allocate(ContainerRequest("new", "c", {RES: 1}))
                want = _held(m)
            finally:
                await m.stop()
            assert _on_disk(cp) == want

    run(main())
