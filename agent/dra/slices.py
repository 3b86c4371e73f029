"""The node's ``resource.k8s.io/v1`` ResourceSlices, built from discovery.

One pool per extended resource (the rules' ``assign`` says which devices are
members), one slice per pool, every healthy member a device with attributes
and capacities. This module is the one source of the attribute names and
values: the CEL selectors of DeviceClasses and claims (``agent.dra``'s
allocator) see exactly what ``device_attributes`` returns, and
``hwagent devices --format resourceslice`` prints the same documents the
kubelet-side driver would publish. Pure functions; the only I/O is
``block_sizes`` (a thin sysfs reader) so a fixture tree gives the same answer
as the live machine.

Attribute values use the API's one-of shape (``{"int": 0}``, ``{"string": "x"}``,
``{"bool": true}``); unqualified names are in the driver's domain (CEL:
``device.attributes["hwagent.io"].numaNode``), the two standard PCI names are
upstream's ``resource.kubernetes.io/pcieRoot`` and ``.../pciBusID``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agent.devices.model import Device, Inventory
from agent.devices.rules import Assignment

__all__ = [
    "API_VERSION",
    "ATTR_KIND", "ATTR_NAME", "ATTR_RESOURCE", "ATTR_NUMA_NODE", "ATTR_PCI_ADDRESS", "ATTR_VENDOR_ID",
    "ATTR_DEVICE_ID", "ATTR_PCI_CLASS", "ATTR_DRIVER", "ATTR_IOMMU_GROUP", "ATTR_SRIOV_VF",
    "STD_PCIE_ROOT", "STD_PCI_BUS_ID", "CAP_SIZE",
    "local_node_name", "dra_device_name", "pool_name", "slice_name", "pcie_root", "device_attributes", "device_capacity",
    "attribute_value", "build_slices", "block_sizes",
]

API_VERSION = "resource.k8s.io/v1"

# attribute names in the driver's own domain (unqualified in the slice)
ATTR_KIND = "kind"  # "pci", "block" or "net"
ATTR_NAME = "name"  # kernel name: PCI address, disk name or interface name
ATTR_RESOURCE = "resource"  # the extended resource the device is offered as ("hwagent.io/nvme")
ATTR_NUMA_NODE = "numaNode"  # int; absent when the kernel reports none (-1)
ATTR_PCI_ADDRESS = "pciAddress"  # the function itself, or the one a disk/interface hangs off
ATTR_VENDOR_ID = "vendorID"  # 4 lower-case hex digits, no 0x ("10de")
ATTR_DEVICE_ID = "deviceID"
ATTR_PCI_CLASS = "pciClass"  # 6 hex digits ("010802")
ATTR_DRIVER = "driver"  # the bound kernel driver
ATTR_IOMMU_GROUP = "iommuGroup"  # int
ATTR_SRIOV_VF = "sriovVF"  # bool, PCI functions only
#: upstream's standard attributes (k8s.io/dynamic-resource-allocation/deviceattribute)
STD_PCIE_ROOT = "resource.kubernetes.io/pcieRoot"  # "pci<domain>:<bus>", the root complex
STD_PCI_BUS_ID = "resource.kubernetes.io/pciBusID"  # "0000:3b:00.0"
#: capacity of a block device, bytes
CAP_SIZE = "size"

_ROOT_COMPLEX = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")
_NOT_LABEL = re.compile(r"[^a-z0-9-]+")


def _dns_label(text: str, limit: int = 63) -> str:
    """Lower-case, runs of anything else as one '-', trimmed; names devices and slices."""
    out = _NOT_LABEL.sub("-", text.lower()).strip("-")
    return out[:limit].rstrip("-") or "x"


def local_node_name(environ: Mapping[str, str] | None = None) -> str:
    """This node's name in slices and pools: ``$NODE_NAME`` (what a DaemonSet's downward API
    sets), else the host name lower-cased, the kubelet's default."""
    env = os.environ if environ is None else environ
    return (env.get("NODE_NAME") or os.uname().nodename).lower()


def dra_device_name(dev_id: str) -> str:
    """The DNS-label device name in a slice and an allocation result.

    A PCI address is not a label (':' and '.'), so "0000:3b:00.0" becomes
    "pci-0000-3b-00-0"; a disk or interface keeps its kernel name, lower-cased
    with anything else than [a-z0-9-] as '-' ("loop0", "eth0").
    """
    if ":" in dev_id:
        return _dns_label("pci-" + dev_id)
    return _dns_label(dev_id)


def pool_name(node_name: str, resource: str) -> str:
    """One pool per resource per node: "<node>/<resource>" (DNS subdomains joined by '/')."""
    return f"{node_name}/{resource}"


def slice_name(node_name: str, driver: str, resource: str) -> str:
    """The slice's object name: a DNS subdomain, unique per node, driver and resource."""
    raw = f"{node_name}-{driver}-{resource}".lower()
    return re.sub(r"[^a-z0-9.-]+", "-", raw).strip("-.")[:253]


def pcie_root(dev: Device) -> str | None:
    """The PCIe root complex ("pci0000:3a") a device sits under, read off its real sysfs path;
    None for virtual devices (loop disks, dummy interfaces)."""
    for part in Path(dev.sysfs_path).parts:
        if _ROOT_COMPLEX.match(part):
            return part
    return None


def attribute_value(value: Any) -> dict[str, Any]:
    """The API's one-of attribute value for a Python value (bool before int: bool is an int)."""
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, str):
        return {"string": value}
    raise TypeError(f"no DRA attribute type for {type(value).__name__}")


def device_attributes(dev: Device, resource: str, inventory: Inventory | None = None) -> dict[str, dict[str, Any]]:
    """Every attribute of one device, in the slice's shape; the allocator's CEL sees these.

    A disk or interface under a PCI function carries that function's address,
    ids, root complex and bus id (``inventory`` gives the parent's ids; without
    it only the address and root are known), so ``matchAttribute`` on
    ``resource.kubernetes.io/pcieRoot`` works across kinds.
    """
    attrs: dict[str, Any] = {ATTR_KIND: dev.kind, ATTR_NAME: dev.name, ATTR_RESOURCE: resource}
    if dev.numa_node is not None and dev.numa_node >= 0:
        attrs[ATTR_NUMA_NODE] = dev.numa_node
    if dev.driver:
        attrs[ATTR_DRIVER] = dev.driver
    pci_dev: Device | None = dev if dev.pci is not None else None
    address = dev.pci.address if dev.pci is not None else dev.parent_pci
    if pci_dev is None and dev.parent_pci and inventory is not None:
        parent = inventory.get(dev.parent_pci)
        pci_dev = parent if parent is not None and parent.pci is not None else None
    if address:
        attrs[ATTR_PCI_ADDRESS] = address
        attrs[STD_PCI_BUS_ID] = address
    if pci_dev is not None and pci_dev.pci is not None:
        info = pci_dev.pci
        attrs[ATTR_VENDOR_ID] = info.vendor
        attrs[ATTR_DEVICE_ID] = info.device
        attrs[ATTR_PCI_CLASS] = info.class_code
        if info.iommu_group is not None:
            attrs[ATTR_IOMMU_GROUP] = info.iommu_group
        if dev.pci is not None:
            attrs[ATTR_SRIOV_VF] = info.is_vf
    root = pcie_root(dev)
    if root:
        attrs[STD_PCIE_ROOT] = root
    return {k: attribute_value(v) for k, v in sorted(attrs.items())}


def device_capacity(dev: Device, sizes: Mapping[str, int] | None = None) -> dict[str, dict[str, str]]:
    """Capacities as quantities: a block device's size in bytes when known."""
    size = (sizes or {}).get(dev.id)
    return {CAP_SIZE: {"value": str(size)}} if size is not None else {}


def build_slices(inventory: Inventory, assignment: Assignment, node_name: str, driver: str,
                 sizes: Mapping[str, int] | None = None, generation: int = 1) -> list[dict[str, Any]]:
    """One ResourceSlice per resource with its healthy members, sorted by resource.

    A device Unhealthy by rule (driver unbound) is left out, so a scheduler
    never picks it; health changes of published devices travel through the
    health service instead. A resource with no healthy member still gets its
    (empty) slice, so the pool is known and a consumer sees zero devices.
    """
    out = []
    for resource, members in sorted(assignment.members.items()):
        devices = []
        for dev_id in members:
            dev = inventory.get(dev_id)
            if dev is None or dev_id in assignment.unhealthy:
                continue
            entry: dict[str, Any] = {
                "name": dra_device_name(dev_id),
                "attributes": device_attributes(dev, resource, inventory),
            }
            cap = device_capacity(dev, sizes)
            if cap:
                entry["capacity"] = cap
            devices.append(entry)
        out.append({
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": slice_name(node_name, driver, resource)},
            "spec": {
                "driver": driver,
                "nodeName": node_name,
                "pool": {"name": pool_name(node_name, resource), "generation": generation, "resourceSliceCount": 1},
                "devices": devices,
            },
        })
    return out


def block_sizes(devices: Iterable[Device]) -> dict[str, int]:
    """Block devices' sizes in bytes from sysfs (``size`` counts 512-byte sectors whatever the
    logical block size); a device whose file is missing or unreadable has none."""
    out: dict[str, int] = {}
    for dev in devices:
        if dev.kind != "block":
            continue
        try:
            out[dev.id] = int((Path(dev.sysfs_path) / "size").read_text().strip()) * 512
        except (OSError, ValueError):
            continue
    return out
