"""The device inventory as plain, frozen data.

Readers (``agent.devices.sysfs``, ``agent.devices.udev``) build an
``Inventory``; rules, device plugins, health and the CLI only consume it. Three
kinds of device are listed, because resource rules select by any of them:

- ``pci``: a PCI function, id = its address ("0000:3b:00.0");
- ``block``: a whole disk (partitions are not devices), id = kernel name ("loop0");
- ``net``: a network interface, id = interface name ("dummy0").

A block or net device that sits under a PCI function also appears as that
function's child, so a PCI resource can hand out its /dev nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from agent.cpuset import CPUSet

__all__ = ["DevNode", "PCIInfo", "Device", "Inventory", "KINDS"]

KINDS = ("pci", "block", "net")


@dataclass(frozen=True)
class DevNode:
    """A /dev node a container can be given. ``kind`` says what it is for
    rules: "block", "nvme", "drm-render", "drm-card", "vfio", "char"."""

    path: str
    kind: str
    major: int | None = None
    minor: int | None = None


@dataclass(frozen=True)
class PCIInfo:
    address: str
    vendor: str  # 4 lower-case hex digits, no 0x
    device: str
    class_code: str  # 6 hex digits: class, subclass, prog-if ("010802")
    subsystem_vendor: str = ""
    subsystem_device: str = ""
    revision: str = ""  # 2 hex digits, "" when the kernel does not expose it
    iommu_group: int | None = None
    #: the PF's address when this function is an SR-IOV VF
    physfn: str | None = None
    #: VF addresses, in virtfn index order, when this is a PF
    virtfns: tuple[str, ...] = ()
    sriov_totalvfs: int | None = None
    sriov_numvfs: int | None = None

    @property
    def is_vf(self) -> bool:
        return self.physfn is not None

    @property
    def is_pf(self) -> bool:
        return self.sriov_totalvfs is not None and self.sriov_totalvfs > 0


@dataclass(frozen=True)
class Device:
    id: str
    kind: str  # one of KINDS
    name: str  # kernel name: address, disk name or interface name
    sysfs_path: str  # real path inside the sysfs root it was read from
    driver: str | None = None
    numa_node: int | None = None
    local_cpus: CPUSet | None = None
    pci: PCIInfo | None = None
    #: the PCI function this block/net device hangs off (None for virtual ones)
    parent_pci: str | None = None
    #: block major:minor ("7:0"); None for pci/net
    devt: str | None = None
    dev_nodes: tuple[DevNode, ...] = ()
    #: for pci: names of the block disks and net interfaces below it
    block_children: tuple[str, ...] = ()
    net_children: tuple[str, ...] = ()

    def nodes_of(self, kinds: Iterable[str]) -> tuple[DevNode, ...]:
        wanted = set(kinds)
        return tuple(n for n in self.dev_nodes if n.kind in wanted)


@dataclass(frozen=True)
class Inventory:
    """All devices by id. PCI addresses contain ':' so never collide with
    kernel names; a disk and an interface of the same name would (the reader
    keeps the first and records a warning)."""

    devices: Mapping[str, Device] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", MappingProxyType(dict(self.devices)))

    def __iter__(self) -> Iterator[Device]:
        return iter(self.devices.values())

    def __len__(self) -> int:
        return len(self.devices)

    def __contains__(self, dev_id: object) -> bool:
        return dev_id in self.devices

    def get(self, dev_id: str) -> Device | None:
        return self.devices.get(dev_id)

    def of_kind(self, kind: str) -> tuple[Device, ...]:
        return tuple(d for d in self.devices.values() if d.kind == kind)

    def with_changes(self, changes: Mapping[str, Device | None]) -> Inventory:
        """A copy with devices replaced, added (Device) or removed (None), as a
        hotplug event needs; order stays that of a fresh read (pci, block, net)."""
        devs = dict(self.devices)
        for dev_id, dev in changes.items():
            if dev is None:
                devs.pop(dev_id, None)
            else:
                devs[dev_id] = dev
        order = {k: i for i, k in enumerate(KINDS)}
        ordered = sorted(devs.values(), key=lambda d: (order[d.kind], d.id))
        return Inventory({d.id: d for d in ordered}, self.warnings)

    def lookup(self, kind: str, key: str) -> tuple[Device, ...]:
        """Devices a health report names: pci by address, net by interface
        name, block by name or "MAJ:MIN"."""
        if kind == "pci":
            d = self.devices.get(key)
            return (d,) if d is not None and d.kind == "pci" else ()
        if kind == "net":
            return tuple(d for d in self.of_kind("net") if d.name == key)
        if kind == "block":
            return tuple(d for d in self.of_kind("block") if key in (d.name, d.devt))
        raise ValueError(f"unknown device kind {kind!r} (expected one of {', '.join(KINDS)})")
