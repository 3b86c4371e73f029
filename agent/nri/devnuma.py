"""The NUMA nodes of a container's device nodes, read from sysfs (a thin reader).

The runtime hands an NRI plugin the device nodes a container was given
(``linux.devices``: path, type, major, minor), whoever gave them (a device
plugin's Allocate, a CDI device, the pod spec). The kernel says which NUMA node
each sits on: ``/sys/dev/{char,block}/<major>:<minor>/device/numa_node`` (-1 or
absent: none). The topology manager aligns the container's CPUs and memory with
those nodes (``agent.nri.placement``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["device_numa_nodes"]

_KINDS = {"c": "char", "u": "char", "b": "block"}


def device_numa_nodes(devices: Iterable[tuple[str, int, int]], sysfs_root: str | Path = "/sys") -> frozenset[int]:
    """NUMA nodes of ``(type, major, minor)`` device nodes; devices with none are left out."""
    nodes: set[int] = set()
    for kind, major, minor in devices:
        sub = _KINDS.get(kind)
        if sub is None or major < 0 or minor < 0:
            continue
        try:
            text = (Path(sysfs_root) / "dev" / sub / f"{major}:{minor}" / "device" / "numa_node").read_text()
            node = int(text.strip())
        except (OSError, ValueError):
            continue
        if node >= 0:
            nodes.add(node)
    return frozenset(nodes)
