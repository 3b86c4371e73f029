"""DRA devices of real machines: an hwloc sysfs snapshot's PCI functions as three resources."""

from __future__ import annotations

from pathlib import Path

from agent.devices.config import ResourceRule
from agent.devices.rules import assign
from agent.devices.sysfs import read_inventory
from agent.dra.catalog import DraDevice, catalog

RULES = (
    ResourceRule(name="example.com/net", pci_class=("02",)),
    ResourceRule(name="example.com/storage", pci_class=("01",)),
    ResourceRule(name="example.com/gpu", pci_class=("03",)),
)
#: two NUMA nodes, NICs on both root complexes, NVMe without locality
TWO_NODES = "32em64t-2n8c+dax+nvme+mic+dimms"


def snapshot_devices(root: Path) -> list[DraDevice]:
    inv = read_inventory(root / "sys", dev_root="/dev")
    return catalog(inv, assign(inv, RULES), "node1", "hwagent.io")
