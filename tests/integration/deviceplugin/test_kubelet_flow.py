"""Done-when: a test acting as the kubelet, over real unix sockets, registers,
watches, hot-plugs and allocates real devices of this machine.

Real here: the virtio NIC PCI function and loop/virtual-link devices created
with real kernel uevents (LOOP_CTL_ADD/REMOVE, ip link add/del). The kubelet
side is tests/.../kubelet_stub.py, which behaves like the current kubelet
(dials back during Register, keeps ListAndWatch open)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.devices.config import DevicesConfig, ResourceRule
from agent.devices.sysfs import read_inventory
from agent.deviceplugin.server import socket_name
from agent.deviceplugin.plugins import DevicePluginsComponent
from tests.integration.devices.kernel import loop_device, net_link
from tests.integration.deviceplugin.kubelet_stub import KubeletStub, registrations_reaching
from tests.integration.devices.driver_binding import try_unbind, unbind_refusal

pytestmark = [pytest.mark.root]

LOOP = "test.hwagent.io/loop"
LINK = "test.hwagent.io/link"
NIC = "test.hwagent.io/nic"
LOOP_N = 243
LINK_NAME = "hwtflow0"


def _cfg(**kw) -> DevicesConfig:
    rules = (
        ResourceRule(name=LOOP, block_name=(f"loop{LOOP_N}",), env={"SCRATCH": "{dev_nodes}"},
                     cdi_kind="test.hwagent.io/loop", annotations={"test.hwagent.io/ids": "{ids}"}),
        ResourceRule(name=LINK, net_name=("hwtflow*",)),
        # the real virtio NIC of this VM (vendor 1af4, class 02 = network)
        ResourceRule(name=NIC, vendor=("1af4",), pci_class=("02",)),
    )
    return DevicesConfig(resources=rules, default_rules=False, register_backoff_initial_s=0.05,
                         register_backoff_max_s=0.2, socket_check_interval_s=0.05, **kw)


def _nic_address() -> str:
    for d in read_inventory().of_kind("pci"):
        if d.pci and d.pci.vendor == "1af4" and d.pci.class_code.startswith("02"):
            return d.id
    pytest.skip("no virtio NIC on this machine")


def test_kubelet_registers_watches_hotplugs_and_allocates(tmp_path: Path) -> None:
    nic = _nic_address()

    async def run() -> None:
        kubelet = KubeletStub(tmp_path / "kubelet.sock")
        await kubelet.start()
        svc = DevicePluginsComponent(_cfg(), plugin_dir=tmp_path, registration_socket=tmp_path / "kubelet.sock",
                                  hotplug=True)
        await svc.start()
        try:
            # -- register + initial snapshot of a real PCI device --------------------
            ep_nic = await kubelet.endpoint(NIC)
            assert ep_nic.options.get_preferred_allocation_available
            req = next(r for r in kubelet.requests if r.resource_name == NIC)
            assert req.version == "v1beta1" and req.endpoint == socket_name(NIC)
            assert nic in ep_nic.latest() and ep_nic.latest()[nic][0] == "Healthy"
            resp = await ep_nic.stub.Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[nic])]))
            envs = dict(resp.container_responses[0].envs)
            assert envs["PCIDEVICE_TEST_HWAGENT_IO_NIC"] == nic

            # -- hotplug a block device: the loop resource appears -------------------
            assert LOOP not in kubelet.endpoints
            with loop_device(LOOP_N) as name:
                ep_loop = await kubelet.endpoint(LOOP)
                snap = await ep_loop.wait_for(lambda s: name in s)
                assert snap[name][0] == "Healthy"
                resp = await ep_loop.stub.Allocate(pb.AllocateRequest(
                    container_requests=[pb.ContainerAllocateRequest(devices_ids=[name])]))
                c = resp.container_responses[0]
                assert [(d.host_path, d.container_path, d.permissions) for d in c.devices] == \
                    [(f"/dev/{name}", f"/dev/{name}", "rw")]
                assert c.envs["SCRATCH"] == f"/dev/{name}"
                assert c.annotations["test.hwagent.io/ids"] == name
                assert [d.name for d in c.cdi_devices] == [f"test.hwagent.io/loop={name}"]

                # bad input: refused whole, nothing changes
                before = dict(ep_loop.latest())
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await ep_loop.stub.Allocate(pb.AllocateRequest(container_requests=[
                        pb.ContainerAllocateRequest(devices_ids=[name]),
                        pb.ContainerAllocateRequest(devices_ids=["loop9999"])]))
                assert e.value.code() == grpc.StatusCode.NOT_FOUND and "loop9999" in e.value.details()
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await ep_loop.stub.Allocate(pb.AllocateRequest(container_requests=[
                        pb.ContainerAllocateRequest(devices_ids=[name, name])]))
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await ep_loop.stub.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
                        pb.ContainerPreferredAllocationRequest(available_deviceIDs=[name], allocation_size=2)]))
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert ep_loop.latest() == before

                # the health board (the pressure side's interface) flips it and back
                board = svc.board
                assert board.set_health_for("block", f"{name}", False, "io stall 2s", "test") == [name]
                snap = await ep_loop.wait_for(lambda s: s.get(name, ("",))[0] == "Unhealthy")
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await ep_loop.stub.Allocate(pb.AllocateRequest(
                        container_requests=[pb.ContainerAllocateRequest(devices_ids=[name])]))
                assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "io stall" in e.value.details()
                devt = svc.inventory.get(name).devt
                assert board.set_health_for("block", devt, True, "recovered", "test") == [name]
                await ep_loop.wait_for(lambda s: s.get(name, ("",))[0] == "Healthy")
            # removed: the device leaves the snapshot (the plugin stays, with 0 devices)
            await ep_loop.wait_for(lambda s: name not in s)

            # -- hotplug a network link -----------------------------------------------
            with net_link(LINK_NAME):
                ep_link = await kubelet.endpoint(LINK)
                await ep_link.wait_for(lambda s: LINK_NAME in s)
                resp = await ep_link.stub.Allocate(pb.AllocateRequest(
                    container_requests=[pb.ContainerAllocateRequest(devices_ids=[LINK_NAME])]))
                assert resp.container_responses[0].envs["HWAGENT_TEST_HWAGENT_IO_LINK_IFACES"] == LINK_NAME
            await ep_link.wait_for(lambda s: LINK_NAME not in s)

            # -- kubelet restart: new socket, plugin sockets wiped -> re-registration --
            n_before = sum(1 for r in kubelet.requests if r.resource_name == NIC)
            await kubelet.stop(cleanup_plugin_sockets=True)
            kubelet2 = KubeletStub(tmp_path / "kubelet.sock")
            await kubelet2.start()
            ep2 = await kubelet2.endpoint(NIC, timeout=15)
            assert nic in ep2.latest()
            assert await registrations_reaching(svc.registrars[NIC], n_before + 1) >= n_before + 1
            assert (tmp_path / socket_name(NIC)).is_socket()
            await kubelet2.stop()
        finally:
            await svc.stop()
            await kubelet.stop()

    asyncio.run(run())


def _virtio_rng() -> str | None:
    for d in read_inventory().of_kind("pci"):
        if d.pci and (d.pci.vendor, d.pci.device) == ("1af4", "1044") and d.driver == "virtio-pci":
            return d.id
    return None


def test_real_driver_unbind_turns_device_unhealthy_and_bind_heals(tmp_path: Path) -> None:
    """Unbinds the VM's virtio entropy device (harmless: the kernel CRNG does
    not need it) with the kernel's real unbind/bind uevents, and re-binds it.

    A machine may forbid unbinding (a driver without bind attributes, lockdown): that
    is found out before the plugin starts, or at the first write, which then changed
    nothing, and the test skips saying why."""
    rng = _virtio_rng()
    if rng is None:
        pytest.skip("no virtio-rng PCI function bound to virtio-pci here")
    drivers = Path("/sys/bus/pci/drivers/virtio-pci")
    refusal = unbind_refusal(drivers)
    if refusal is not None:
        pytest.skip(f"cannot unbind {rng} here: {refusal}")
    res = "test.hwagent.io/rng"
    cfg = DevicesConfig(resources=(ResourceRule(name=res, vendor=("1af4",), device=("1044",), driver=("virtio-pci",)),),
                        default_rules=False, register_backoff_initial_s=0.05, socket_check_interval_s=0.05)

    async def run() -> None:
        kubelet = KubeletStub(tmp_path / "kubelet.sock")
        await kubelet.start()
        svc = DevicePluginsComponent(cfg, plugin_dir=tmp_path, registration_socket=tmp_path / "kubelet.sock",
                                  hotplug=True)
        await svc.start()
        try:
            ep = await kubelet.endpoint(res)
            assert ep.latest()[rng][0] == "Healthy"
            refused = try_unbind(drivers, rng)
            if refused is not None:
                pytest.skip(f"cannot unbind {rng} here: {refused}")
            await ep.wait_for(lambda s: s.get(rng, ("",))[0] == "Unhealthy")
            assert svc.plugins[res].devices[rng].reason == "driver unbound"
            (drivers / "bind").write_text(rng)
            await ep.wait_for(lambda s: s.get(rng, ("",))[0] == "Healthy")
        finally:
            if not Path(f"/sys/bus/pci/devices/{rng}/driver").exists():
                (drivers / "bind").write_text(rng)
            await svc.stop()
            await kubelet.stop()

    asyncio.run(run())
