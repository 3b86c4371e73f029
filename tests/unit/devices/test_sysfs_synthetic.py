"""Discovery details the hwloc snapshots do not contain: SR-IOV PF/VF links,
IOMMU groups and vfio nodes, DRM render nodes, NVMe controller + namespace,
partitions, virtual block/net devices and their lookup keys."""

from __future__ import annotations

import pytest

from agent.cpuset import CPUSet
from agent.devices.sysfs import read_inventory
from tests.unit.devices.fakesysfs import FakeSysfs


@pytest.fixture
def tree(tmp_path):
    fs = FakeSysfs(tmp_path / "sys")
    fs.pci("0000:3b:00.0", vendor="15b3", device="1017", cls="020000", driver="mlx5_core", numa=1,
           cpus="4-7", iommu=30, totalvfs=8)
    fs.vf("0000:3b:00.0", 0, "0000:3b:00.2", vendor="15b3", device="1018", driver="vfio-pci", numa=1,
          cpus="4-7", iommu=31)
    fs.vf("0000:3b:00.0", 1, "0000:3b:00.3", vendor="15b3", device="1018", driver="mlx5_core", numa=1,
          cpus="4-7", iommu=32)
    fs.child("0000:3b:00.3", "net/ens1f0v1")
    fs.pci("0000:65:00.0", vendor="10de", device="20b0", cls="030200", driver="nvidia", numa=0, cpus="0-3")
    fs.child("0000:65:00.0", "drm/renderD128", dev="226:128", devname="dri/renderD128")
    fs.child("0000:65:00.0", "drm/card1", dev="226:1", devname="dri/card1")
    fs.pci("0000:5e:00.0", vendor="144d", device="a808", cls="010802", driver="nvme", numa=0, cpus="0-3")
    fs.child("0000:5e:00.0", "nvme/nvme0", dev="240:0", devname="nvme0")
    fs.child("0000:5e:00.0", "nvme/nvme0/block/nvme0n1", dev="259:0", devname="nvme0n1")
    fs.child("0000:5e:00.0", "nvme/nvme0/block/nvme0n1/nvme0n1p1", dev="259:1", devname="nvme0n1p1",
             partition=True)
    fs.virtual_block("loop3", "7:3")
    fs.virtual_net("dummy0")
    return fs


def test_sriov_links_and_iommu(tree):
    inv = read_inventory(tree.root)
    pf, vf0, vf1 = (inv.get(a) for a in ("0000:3b:00.0", "0000:3b:00.2", "0000:3b:00.3"))
    assert pf.pci.is_pf and not pf.pci.is_vf
    assert pf.pci.sriov_totalvfs == 8 and pf.pci.sriov_numvfs == 2
    assert pf.pci.virtfns == ("0000:3b:00.2", "0000:3b:00.3")
    assert vf0.pci.physfn == "0000:3b:00.0" and vf0.pci.is_vf
    assert (pf.pci.iommu_group, vf0.pci.iommu_group) == (30, 31)
    # vfio-bound: the group's node; a VF on its normal driver has none
    assert [(n.path, n.kind) for n in vf0.dev_nodes] == [("/dev/vfio/31", "vfio")]
    assert vf1.dev_nodes == () and vf1.net_children == ("ens1f0v1",)
    assert vf0.numa_node == 1 and vf0.local_cpus == CPUSet.parse("4-7")


def test_gpu_and_nvme_nodes(tree):
    inv = read_inventory(tree.root, dev_root="/host/dev")
    gpu = inv.get("0000:65:00.0")
    assert [(n.path, n.kind, n.major, n.minor) for n in gpu.dev_nodes] == [
        ("/host/dev/dri/card1", "drm-card", 226, 1), ("/host/dev/dri/renderD128", "drm-render", 226, 128)]
    nvme = inv.get("0000:5e:00.0")
    assert [(n.path, n.kind) for n in nvme.dev_nodes] == [("/host/dev/nvme0", "nvme"), ("/host/dev/nvme0n1", "block")]
    assert nvme.block_children == ("nvme0n1",)  # the partition is not a device
    disk = inv.get("nvme0n1")
    assert disk.kind == "block" and disk.parent_pci == "0000:5e:00.0" and disk.devt == "259:0"
    assert disk.numa_node == 0  # from its PCI function
    assert "nvme0n1p1" not in inv


def test_virtual_devices_and_lookup(tree):
    inv = read_inventory(tree.root)
    loop = inv.get("loop3")
    assert loop.kind == "block" and loop.parent_pci is None and loop.numa_node is None
    assert [n.path for n in loop.dev_nodes] == ["/dev/loop3"]
    assert inv.lookup("block", "7:3") == (loop,) and inv.lookup("block", "loop3") == (loop,)
    assert inv.lookup("net", "dummy0")[0].kind == "net"
    assert inv.lookup("pci", "0000:65:00.0")[0].pci.vendor == "10de"
    assert inv.lookup("pci", "loop3") == () and inv.lookup("block", "8:0") == ()
    with pytest.raises(ValueError, match="unknown device kind"):
        inv.lookup("usb", "1-1")


def test_missing_files_read_as_unknown(tmp_path):
    fs = FakeSysfs(tmp_path / "sys")
    d = fs.pci("0000:00:1f.0")
    for f in ("numa_node", "local_cpulist", "revision", "subsystem_vendor"):
        (d / f).unlink()
    dev = read_inventory(fs.root).get("0000:00:1f.0")
    assert dev.numa_node is None and dev.local_cpus is None and dev.pci.revision == ""
    assert dev.pci.subsystem_vendor == "" and dev.driver is None


def test_vanished_symlink_target_is_skipped(tree):
    (tree.root / "devices/virtual/net/dummy0").rmdir()
    assert "dummy0" not in read_inventory(tree.root)


def test_single_device_reads_match_a_full_read(tree):
    """What hotplug re-reads for one uevent equals the same device in a full read."""
    from agent.devices.sysfs import read_device

    inv = read_inventory(tree.root)
    for sub, name in (("pci", "0000:3b:00.2"), ("pci", "0000:5e:00.0"), ("block", "nvme0n1"), ("block", "loop3"),
                      ("net", "dummy0")):
        assert read_device(tree.root, sub, name) == inv.get(name)
    assert read_device(tree.root, "block", "nvme0n1p1") is None  # partitions are not devices
    assert read_device(tree.root, "net", "gone0") is None
    patched = inv.with_changes({"dummy0": None, "loop3": read_device(tree.root, "block", "loop3")})
    assert "dummy0" not in patched and list(patched.devices) == [i for i in inv.devices if i != "dummy0"]
