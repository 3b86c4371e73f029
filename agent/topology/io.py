"""Devices as the picture draws them: PCI functions with names, under their NUMA node.

lstopo's default I/O view: PCI functions that are not bridges, each with the
block disks and network interfaces hanging off it; names from pci.ids when
installed, else the hex ids.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.devices.model import Device
from agent.devices.pciids import PciNames
from agent.topology.picture import DeviceItem

__all__ = ["device_items", "drawn"]


def drawn(d: Device) -> bool:
    """PCI functions except bridges (class 06): what an operator asks where it sits."""
    return d.kind == "pci" and d.pci is not None and not d.pci.class_code.startswith("06")


def device_items(devices: Iterable[Device], names: PciNames) -> list[DeviceItem]:
    out = []
    for d in devices:
        if not drawn(d):
            continue
        pci = d.pci
        assert pci is not None
        name = names.describe(pci.vendor, pci.device) or f"{pci.vendor}:{pci.device}"
        cls = names.class_name(pci.class_code[:4]) or f"class {pci.class_code}"
        children = ", ".join(d.block_children + d.net_children)
        out.append(DeviceItem(d.id, f"{d.id.removeprefix('0000:')} {name}", children or cls, d.numa_node))
    return out
