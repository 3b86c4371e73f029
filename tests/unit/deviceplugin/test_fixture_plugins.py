"""Built-in plugins over real unix sockets against fixture machines: the
kubelet stub registers, watches and allocates devices of hwloc snapshots
(multi-NUMA, which this VM cannot show) and of hand-built trees where a
driver unbinds and a device vanishes (refresh() stands in for the uevent)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import grpc
import pytest

from agent.config import section_defaults
from agent.contracts import DEVICE_HEALTH
from agent.contracts import DaemonContext
from agent.topology.model import synthetic
from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.devices.config import DevicesConfig, ResourceRule
from agent.devices.rules import RuleConflictError
from agent.deviceplugin.plugins import DevicePluginsComponent
from agent.deviceplugin.server import socket_name
from tests.integration.deviceplugin.kubelet_stub import KubeletStub
from tests.unit.devices.fakesysfs import FakeSysfs

VE = "example.com/ioat"


def _svc(tmp: Path, sysfs: Path, cfg: DevicesConfig) -> DevicePluginsComponent:
    cfg = DevicesConfig(**{**cfg.__dict__, "register_backoff_initial_s": 0.05, "socket_check_interval_s": 0.05})
    return DevicePluginsComponent(cfg, sysfs_root=str(sysfs), plugin_dir=tmp / "dp",
                               registration_socket=tmp / "dp" / "kubelet.sock", hotplug=False)


def _alloc(ids):
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)])


def test_dma_engines_of_a_two_node_snapshot(tmp_path, hwloc_extract):
    """I/OAT DMA engines (as DPDK/SPDK consume them) on both NUMA nodes of a 2-socket box."""
    root = hwloc_extract("32em64t-2n8c+dax+nvme+mic+dimms") / "sys"
    cfg = DevicesConfig(default_rules=False,
                        resources=(ResourceRule(name=VE, vendor=("8086",), driver=("ioatdma",)),))
    # the kernel's own numa_node of every ioatdma-bound function, read independently
    want = {p.name: int((p / "numa_node").read_text()) for p in (root / "bus/pci/devices").iterdir()
            if (p / "driver").is_symlink() and Path(os.readlink(p / "driver")).name == "ioatdma"}
    assert len(set(want.values())) > 1

    async def run():
        kubelet = KubeletStub(tmp_path / "dp" / "kubelet.sock")
        await kubelet.start()
        svc = _svc(tmp_path, root, cfg)
        await svc.start()
        try:
            ep = await kubelet.endpoint(VE)
            assert ep.latest() == {a: ("Healthy", (n,)) for a, n in want.items()}
            per_node = {n: sorted(a for a, m in want.items() if m == n) for n in set(want.values())}
            node, ids = max(per_node.items(), key=lambda kv: len(kv[1]))
            resp = await ep.stub.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
                pb.ContainerPreferredAllocationRequest(available_deviceIDs=sorted(want), allocation_size=len(ids))]))
            assert sorted(resp.container_responses[0].deviceIDs) == ids
            # must-include from the other node: one device there, the rest packed on one node
            other = next(a for a, m in sorted(want.items()) if m != node)
            resp = await ep.stub.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
                pb.ContainerPreferredAllocationRequest(available_deviceIDs=sorted(want),
                                                       must_include_deviceIDs=[other], allocation_size=2)]))
            got = list(resp.container_responses[0].deviceIDs)
            assert got[0] == other and want[got[1]] == want[other]
            resp = await ep.stub.Allocate(pb.AllocateRequest(container_requests=[
                pb.ContainerAllocateRequest(devices_ids=ids[:2]), pb.ContainerAllocateRequest(devices_ids=ids[2:3])]))
            assert [c.envs["PCIDEVICE_EXAMPLE_COM_IOAT"] for c in resp.container_responses] == \
                [",".join(ids[:2]), ids[2]]
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await ep.stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=["0000:ff:00.0"]))
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
        finally:
            await svc.stop()
            await kubelet.stop()

    asyncio.run(run())


def test_nvme_default_rule_on_snapshot(tmp_path, hwloc_extract):
    root = hwloc_extract("32em64t-2n8c+dax+nvme+mic+dimms") / "sys"

    async def run():
        kubelet = KubeletStub(tmp_path / "dp" / "kubelet.sock")
        await kubelet.start()
        svc = _svc(tmp_path, root, DevicesConfig())
        await svc.start()
        try:
            ep = await kubelet.endpoint("hwagent.io/nvme")
            (nvme,) = ep.latest()
            assert ep.latest()[nvme] == ("Healthy", ())  # numa_node -1 there: no topology
            resp = await ep.stub.Allocate(_alloc([nvme]))
            assert [d.host_path for d in resp.container_responses[0].devices] == ["/dev/nvme0", "/dev/nvme0n1"]
            assert set(kubelet.endpoints) == {"hwagent.io/nvme"}  # no empty default resources registered
        finally:
            await svc.stop()
            await kubelet.stop()

    asyncio.run(run())


def test_unbind_vanish_and_health_board(tmp_path):
    fs = FakeSysfs(tmp_path / "sys")
    fs.pci("0000:3b:00.0", vendor="15b3", device="1017", driver="mlx5_core", numa=1, iommu=30, totalvfs=4)
    for i in range(3):
        fs.vf("0000:3b:00.0", i, f"0000:3b:00.{i + 2}", vendor="15b3", device="1018", driver="vfio-pci",
              numa=1, iommu=31 + i)
    res = "hwagent.io/sriov-vf"

    async def run():
        kubelet = KubeletStub(tmp_path / "dp" / "kubelet.sock")
        await kubelet.start()
        ctx = DaemonContext(section_defaults(), tmp_path / "root", synthetic())
        svc = _svc(tmp_path, fs.root, DevicesConfig())
        await svc.start(ctx)
        board = ctx.lookup(DEVICE_HEALTH)
        try:
            ep = await kubelet.endpoint(res)
            assert set(ep.latest()) == {"0000:3b:00.2", "0000:3b:00.3", "0000:3b:00.4"}
            fs.unbind("0000:3b:00.3")
            svc.refresh()
            snap = await ep.wait_for(lambda s: s["0000:3b:00.3"][0] == "Unhealthy")
            assert snap["0000:3b:00.2"] == ("Healthy", (1,))
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await ep.stub.Allocate(_alloc(["0000:3b:00.3"]))
            assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "driver unbound" in e.value.details()
            fs.bind("0000:3b:00.3", "vfio-pci")
            svc.refresh()
            await ep.wait_for(lambda s: s["0000:3b:00.3"][0] == "Healthy")
            # a vanished device leaves the snapshot
            fs.remove(fs.root / "bus/pci/devices/0000:3b:00.4")
            svc.refresh()
            await ep.wait_for(lambda s: "0000:3b:00.4" not in s)
            # the board, by PCI address
            assert board.set_health_for("pci", "0000:3b:00.2", False, "AER fatal", "aer") == ["0000:3b:00.2"]
            await ep.wait_for(lambda s: s["0000:3b:00.2"][0] == "Unhealthy")
            assert board.set_health_for("pci", "0000:3b:00.0", False, "x", "aer") == []  # the PF is offered by none
            board.set_health_for("pci", "0000:3b:00.2", True, "cleared", "aer")
            await ep.wait_for(lambda s: s["0000:3b:00.2"][0] == "Healthy")
        finally:
            await svc.stop()
            await kubelet.stop()

    asyncio.run(run())


def test_conflicting_rules_refuse_to_start(tmp_path):
    fs = FakeSysfs(tmp_path / "sys")
    fs.pci("0000:3b:00.0", vendor="15b3", device="1017", driver="mlx5_core")
    fs.vf("0000:3b:00.0", 0, "0000:3b:00.2", vendor="15b3", device="1018", driver="vfio-pci", iommu=3)
    cfg = DevicesConfig(resources=(ResourceRule(name="example.com/vf", vendor=("15b3",), sriov="vf"),))

    async def run():
        svc = _svc(tmp_path, fs.root, cfg)
        with pytest.raises(RuleConflictError, match="0000:3b:00.2"):
            await svc.start()
        assert not (tmp_path / "dp").exists() or not any((tmp_path / "dp").iterdir())

    asyncio.run(run())


async def _until(cond, timeout_s: float = 30.0):
    """Poll ``cond()`` on the loop until it returns something true (generous deadline: loaded machines)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not (got := cond()):
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)
    return got


def test_plugin_states_are_values_of_the_live_plugins(tmp_path):
    """What status reads: per resource its socket, devices with health, reason and NUMA
    node, and whether the registration stands, as values taken when asked."""
    fs = FakeSysfs(tmp_path / "sys")
    fs.pci("0000:3b:00.0", vendor="15b3", device="1017", driver="mlx5_core", numa=1, iommu=30, totalvfs=4)
    for i in range(2):
        fs.vf("0000:3b:00.0", i, f"0000:3b:00.{i + 2}", vendor="15b3", device="1018", driver="vfio-pci",
              numa=1, iommu=31 + i)
    res = "hwagent.io/sriov-vf"

    async def run():
        svc = _svc(tmp_path, fs.root, DevicesConfig())
        await svc.start(DaemonContext(section_defaults(), tmp_path / "root", synthetic()))
        kubelet = KubeletStub(tmp_path / "dp" / "kubelet.sock")
        try:
            # no kubelet yet: not registered, and the registrar says why
            (state,) = await _until(lambda: [s for s in svc.plugin_states() if s.last_error])
            assert state.resource == res and not state.registered and "does not exist" in state.last_error
            assert state.socket == tmp_path / "dp" / socket_name(res) and state.socket.is_socket()
            assert [(d.id, d.healthy, d.numa_node) for d in state.devices] == \
                [("0000:3b:00.2", True, 1), ("0000:3b:00.3", True, 1)]
            assert state.healthy == 2
            await kubelet.start()
            await _until(lambda: all(s.registered for s in svc.plugin_states()))
            assert svc.plugin_states()[0].last_error == ""
            fs.unbind("0000:3b:00.3")
            svc.refresh()
            (state,) = svc.plugin_states()
            assert [(d.id, d.healthy, d.reason) for d in state.devices] == \
                [("0000:3b:00.2", True, ""), ("0000:3b:00.3", False, "driver unbound")]
            assert state.healthy == 1
            assert not state.devices[1].healthy  # a value: a later change does not reach it
            fs.bind("0000:3b:00.3", "vfio-pci")
            svc.refresh()
            assert svc.plugin_states()[0].healthy == 2 and state.healthy == 1
        finally:
            await svc.stop()
            await kubelet.stop()
        assert svc.plugin_states() == []

    asyncio.run(run())
