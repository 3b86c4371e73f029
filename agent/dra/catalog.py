"""The node's DRA devices as the allocator sees them: one ``DraDevice`` per
healthy member of a resource, named, pooled and attributed exactly as the
node's ResourceSlices publish them (``agent.dra.slices`` is the one source of
names and attributes; this module only flattens its one-of values for CEL and
remembers which inventory device each DRA device is).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.devices.model import Inventory
from agent.devices.rules import Assignment
from agent.dra.slices import device_attributes, device_capacity, dra_device_name, pool_name

__all__ = ["DraDevice", "DeviceKey", "Version", "catalog", "qualified", "typed"]

#: (driver, pool, device): what an allocation result names
DeviceKey = tuple[str, str, str]


@dataclass(frozen=True)
class Version:
    """A ``version`` attribute (semantic version text): its own type, never equal to a string
    with the same text, as the API's one-of keeps it (CEL sees a ``Semver``)."""

    text: str


def typed(value: Any) -> tuple[str, Any]:
    """An attribute value with its API type, for ``matchAttribute``: int, bool, string and version
    are different types and never equal (Python's ``True == 1`` must not decide). Versions compare
    by their text, as upstream does (semver 2.0.0 text is in its one minimal form)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, Version):
        return ("version", value.text)
    return ("string", str(value))


@dataclass(frozen=True)
class DraDevice:
    driver: str
    pool: str
    name: str
    #: fully qualified attribute name ("hwagent.io/numaNode") -> int, bool, str or Version
    attributes: Mapping[str, Any] = field(default_factory=dict)
    #: fully qualified capacity name -> integer quantity
    capacity: Mapping[str, int] = field(default_factory=dict)
    #: the NUMA node the device is local to, for the topology manager (None: no locality)
    numa_node: int | None = None
    #: the hwagent inventory id ("0000:3b:00.0", "loop0") and its resource rule
    inventory_id: str = ""
    resource: str = ""

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)


def qualified(name: str, driver: str) -> str:
    """An attribute name as CEL and ``matchAttribute`` see it: unqualified names are the driver's."""
    return name if "/" in name else f"{driver}/{name}"


def _plain(value: Mapping[str, Any]) -> Any:
    (kind, v), = value.items()
    return v if kind != "version" else Version(str(v))


def catalog(inventory: Inventory, assignment: Assignment, node_name: str, driver: str,
            sizes: Mapping[str, int] | None = None) -> list[DraDevice]:
    """Every healthy member of every resource, sorted by pool, in the slice's order within a pool
    (the order upstream's allocator walks a pool's devices in)."""
    out = []
    for resource, members in sorted(assignment.members.items()):
        for dev_id in members:
            dev = inventory.get(dev_id)
            if dev is None or dev_id in assignment.unhealthy:
                continue
            attrs = {qualified(k, driver): _plain(v) for k, v in device_attributes(dev, resource, inventory).items()}
            cap = {qualified(k, driver): int(v["value"]) for k, v in device_capacity(dev, sizes).items()}
            numa = dev.numa_node if dev.numa_node is not None and dev.numa_node >= 0 else None
            out.append(DraDevice(driver, pool_name(node_name, resource), dra_device_name(dev_id), attrs, cap,
                                 numa, dev_id, resource))
    return sorted(out, key=lambda d: d.pool)
