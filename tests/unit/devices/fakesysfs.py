"""Build small sysfs trees by hand for what the snapshots lack (SR-IOV,
IOMMU groups, vfio, DRM render nodes), laid out as the kernel lays them out:
real dirs under devices/, relative symlinks from bus/ and class/."""

from __future__ import annotations

import os
from pathlib import Path


class FakeSysfs:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "bus/pci/devices").mkdir(parents=True, exist_ok=True)
        (root / "bus/pci/drivers").mkdir(parents=True, exist_ok=True)
        (root / "class/block").mkdir(parents=True, exist_ok=True)
        (root / "class/net").mkdir(parents=True, exist_ok=True)
        (root / "kernel/iommu_groups").mkdir(parents=True, exist_ok=True)

    def _link(self, link: Path, target: Path) -> None:
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink():
            link.unlink()
        os.symlink(os.path.relpath(target, link.parent), link)

    def pci(self, addr: str, *, vendor: str = "8086", device: str = "1234", cls: str = "020000",
            driver: str | None = None, numa: int = -1, cpus: str = "0-3", iommu: int | None = None,
            parent: str | None = None, totalvfs: int | None = None) -> Path:
        base = self.root / "devices" / (f"pci{addr[:7]}" if parent is None else "")
        d = (self.pci_dir(parent) / addr) if parent else base / addr
        d.mkdir(parents=True, exist_ok=True)
        for name, value in (("vendor", f"0x{vendor}"), ("device", f"0x{device}"), ("class", f"0x{cls}"),
                            ("subsystem_vendor", "0x8086"), ("subsystem_device", "0x0000"),
                            ("revision", "0x01"), ("numa_node", str(numa)), ("local_cpulist", cpus)):
            (d / name).write_text(value + "\n")
        if totalvfs is not None:
            (d / "sriov_totalvfs").write_text(f"{totalvfs}\n")
            (d / "sriov_numvfs").write_text("0\n")
        self._link(self.root / "bus/pci/devices" / addr, d)
        if driver:
            self.bind(addr, driver)
        if iommu is not None:
            g = self.root / "kernel/iommu_groups" / str(iommu)
            g.mkdir(parents=True, exist_ok=True)
            self._link(d / "iommu_group", g)
        return d

    def pci_dir(self, addr: str) -> Path:
        return Path(os.path.realpath(self.root / "bus/pci/devices" / addr))

    def bind(self, addr: str, driver: str) -> None:
        drv = self.root / "bus/pci/drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        self._link(self.pci_dir(addr) / "driver", drv)

    def unbind(self, addr: str) -> None:
        (self.pci_dir(addr) / "driver").unlink()

    def vf(self, pf: str, index: int, addr: str, **kw) -> Path:
        d = self.pci(addr, **kw)
        self._link(d / "physfn", self.pci_dir(pf))
        self._link(self.pci_dir(pf) / f"virtfn{index}", d)
        (self.pci_dir(pf) / "sriov_numvfs").write_text(f"{index + 1}\n")
        return d

    def child(self, addr: str, rel: str, *, dev: str | None = None, devname: str | None = None,
              partition: bool = False) -> Path:
        d = self.pci_dir(addr) / rel
        d.mkdir(parents=True, exist_ok=True)
        if dev:
            (d / "dev").write_text(dev + "\n")
        if devname:
            (d / "uevent").write_text(f"MAJOR={dev.split(':')[0] if dev else 0}\nDEVNAME={devname}\n")
        if partition:
            (d / "partition").write_text("1\n")
        klass = Path(rel).parent.name
        if klass in ("block", "net"):
            self._link(self.root / "class" / klass / d.name, d)
        return d

    def virtual_block(self, name: str, dev: str) -> Path:
        d = self.root / "devices/virtual/block" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "dev").write_text(dev + "\n")
        (d / "uevent").write_text(f"DEVNAME={name}\n")
        self._link(self.root / "class/block" / name, d)
        return d

    def virtual_net(self, name: str) -> Path:
        d = self.root / "devices/virtual/net" / name
        d.mkdir(parents=True, exist_ok=True)
        self._link(self.root / "class/net" / name, d)
        return d

    def remove(self, link: Path) -> None:
        link.unlink()
