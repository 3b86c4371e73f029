"""Devices on different NUMA nodes of a real kernel, and NUMA-aligned allocation by the
device-plugin host and the built-in plugins.

qemu puts a PCIe expander bridge on each NUMA node named by the topology's
``pci_numa_nodes``; behind each sit a virtio-blk disk (serial ``vmtest-n<node>``), a
virtio-net interface (MAC ``52:54:00:00:0<node>:..``) and an ``edu`` PCI device (1234:11e8).
The kernel derives numa_node from the bridge's ACPI proximity, the way real multi-socket
servers report it; on the host every device is on the one node.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from agent.contracts import DaemonContext
from agent.daemon.daemon import prepare_root
from agent.config import loads
from agent.contracts import ACTIVE_PODS, DEVICE_MANAGER
from agent.devicemanager.component import factory as host_factory
from agent.contracts.devices import ContainerRequest
from agent.deviceplugin.component import factory as plugins_factory
from agent.devices.sysfs import read_inventory
from agent.pods import StaticActivePods
from agent.topology.sysfs import read_topology
from tests.vm.topologies import GuestTopology

EDU, DISK, NIC = "example.com/edu", "example.com/vdisk", "example.com/vnic"


@pytest.fixture
def pci_nodes(topo: GuestTopology) -> tuple[int, ...]:
    if len(set(topo.pci_numa_nodes)) < 2:
        pytest.skip(f"topology {topo.name} has no PCI devices on two NUMA nodes")
    return topo.pci_numa_nodes


def expected_nodes() -> dict[str, dict[str, int]]:
    """What qemu was told, read back from identities the kernel reports independently
    of NUMA (disk serial, MAC): kind -> name -> node."""
    disks = {p.name: int(p.joinpath("serial").read_text().strip().rsplit("n", 1)[1])
             for p in Path("/sys/block").glob("vd*") if p.joinpath("serial").exists()}
    nics = {p.name: int(p.joinpath("address").read_text().split(":")[4])
            for p in Path("/sys/class/net").iterdir() if p.joinpath("address").read_text().startswith("52:54:00:00:")}
    return {"block": disks, "net": nics}


def test_inventory_places_devices_on_their_numa_nodes(pci_nodes: tuple[int, ...]) -> None:
    inv = read_inventory()
    edu = {d.id: d.numa_node for d in inv.of_kind("pci") if d.pci and (d.pci.vendor, d.pci.device) == ("1234", "11e8")}
    assert sorted(edu.values()) == sorted(pci_nodes)
    want = expected_nodes()
    assert sorted(want["block"].values()) == sorted(pci_nodes), "guest did not get one disk per expander bridge"
    assert sorted(want["net"].values()) == sorted(pci_nodes), "guest did not get one NIC per expander bridge"
    topo = read_topology()
    for kind, names in want.items():
        for name, node in names.items():
            dev = next(d for d in inv.of_kind(kind) if d.name == name)
            assert dev.numa_node == node, f"{kind} {name}"
            assert dev.parent_pci is not None and inv.get(dev.parent_pci).numa_node == node, f"{kind} {name} parent"
            assert dev.local_cpus == topo.cpus_of_numa(node), f"{kind} {name} local_cpus"


def test_host_and_builtin_plugins_allocate_numa_aligned(pci_nodes: tuple[int, ...]) -> None:
    want = expected_nodes()
    cfg = loads(f'''
[devices]
default_rules = false
register_backoff_initial_s = 0.05
socket_check_interval_s = 0.05
[[devices.resources]]
name = "{EDU}"
vendor = ["1234"]
device = ["11e8"]
env = {{ EDU_NUMA = "{{numa_nodes}}" }}
[[devices.resources]]
name = "{DISK}"
block_name = ["vd*"]
env = {{ DISKS = "{{block_devs}}", DISK_NODES = "{{dev_nodes}}" }}
[[devices.resources]]
name = "{NIC}"
net_name = ["eth*", "enp*"]
''')
    short = Path(tempfile.mkdtemp(prefix="hwvmdp"))
    topo = read_topology()
    ctx = DaemonContext(cfg, short / "root", topo, mode="standalone")
    ctx.publish(ACTIVE_PODS, StaticActivePods({"pod-a", "pod-b"}))
    prepare_root(ctx.root_dir)
    far = max(pci_nodes)

    async def run() -> None:
        host = host_factory(ctx)
        await host.start(ctx)
        plugins = plugins_factory(ctx)
        await plugins.start(ctx)
        try:
            manager = ctx.lookup(DEVICE_MANAGER)
            counts = {EDU: len(pci_nodes), DISK: len(pci_nodes), NIC: len(pci_nodes)}

            for _ in range(1200):
                if all(manager.capacity()[1].get(r, 0) >= n for r, n in counts.items()):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"plugins did not register {counts}: capacity {manager.capacity()}")
            # one device of each: the hints name each single node, preferred
            hints = manager.topology_hints("pod-a", "c", {EDU: 1, DISK: 1})
            for res in (EDU, DISK):
                preferred = {tuple(sorted(h.nodes)) for h in hints[res] if h.preferred}
                assert preferred == {(n,) for n in pci_nodes}, (res, hints[res])
            # allocation follows the NUMA hint for every resource
            await manager.allocate(ContainerRequest("pod-a", "c", {EDU: 1, DISK: 1, NIC: 1}, hint=frozenset({far})))
            opts = manager.run_options("pod-a", "c")
            assert opts.envs["EDU_NUMA"] == str(far)
            disk = opts.envs["DISKS"]
            assert want["block"][disk] == far and opts.envs["DISK_NODES"] == f"/dev/{disk}"
            assert {d.host_path for d in opts.devices} == {f"/dev/{disk}"}
            assert Path(f"/dev/{disk}").is_block_device()
            nic = opts.envs["HWAGENT_EXAMPLE_COM_VNIC_IFACES"]
            assert want["net"][nic] == far
            # the far node's edu is taken: a second pod gets the other node's
            await manager.allocate(ContainerRequest("pod-b", "c", {EDU: 1}, hint=None))
            opts_b = manager.run_options("pod-b", "c")
            assert opts_b.envs["EDU_NUMA"] != str(far)
        finally:
            await plugins.stop()
            await host.stop()

    try:
        asyncio.run(asyncio.wait_for(run(), 180))
    finally:
        shutil.rmtree(short, ignore_errors=True)
