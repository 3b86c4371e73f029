"""Device enumeration through libudev (pyudev), for the live machine.

libudev knows which devices exist the way udev does (including the device
type "disk" vs "partition" and the /dev names udev rules gave them); the
attribute reading is shared with the sysfs reader, so both paths produce the
same Inventory. Fixture roots always go through plain sysfs.
"""

from __future__ import annotations

from pathlib import Path

from agent.devices.model import Inventory
from agent.devices.sysfs import PCI_ADDRESS, build_inventory, read_inventory
from agent.eventlog import get_logger

__all__ = ["read_inventory_udev", "discover"]

log = get_logger("hwagent.devices")


def read_inventory_udev(dev_root: str = "/dev") -> Inventory:
    import pyudev  # imported here: fixture-only users never need libudev

    ctx = pyudev.Context()
    root = Path(ctx.sys_path)
    pci = [Path(d.sys_path) for d in ctx.list_devices(subsystem="pci") if PCI_ADDRESS.match(d.sys_name)]
    block = [Path(d.sys_path) for d in ctx.list_devices(subsystem="block", DEVTYPE="disk")]
    net = [Path(d.sys_path) for d in ctx.list_devices(subsystem="net")]
    return build_inventory(root, sorted(pci), sorted(block, key=lambda p: p.name), sorted(net, key=lambda p: p.name),
                           dev_root)


def discover(sysfs_root: str = "/sys", dev_root: str = "/dev") -> Inventory:
    """udev for the live /sys when libudev loads, plain sysfs otherwise."""
    if sysfs_root == "/sys":
        try:
            return read_inventory_udev(dev_root)
        except (ImportError, OSError) as e:  # no libudev on this host
            log.info("udev unavailable", error=e, note="reading sysfs directly")
    return read_inventory(sysfs_root, dev_root)
