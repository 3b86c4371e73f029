"""The built-in device plugins as status shows them: plain values, no I/O.

The devices component owns its plugin servers and their registrars; a reader
(``hwagent status``, the resources view) asks it for a ``PluginState`` per
resource when it answers (``DevicePlugins.plugin_states``) instead of holding the
server or registrar objects, so it can neither reach into a server's gRPC side
nor keep a stale one after the plugin was replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["PluginDeviceState", "PluginState"]


@dataclass(frozen=True)
class PluginDeviceState:
    """One device a plugin offers, as its last ListAndWatch snapshot says."""

    id: str
    healthy: bool
    #: why not healthy (rule and health board joined); "" when healthy
    reason: str = ""
    #: the device's NUMA node; None = sysfs reports none
    numa_node: int | None = None
    #: host paths of the device's nodes the rule hands out: how a device is known by its file
    #: (a Slurm job's GRES record names files)
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PluginState:
    """One resource's plugin: where it serves, what it offers, whether it is registered."""

    resource: str
    socket: Path
    #: sorted by id
    devices: tuple[PluginDeviceState, ...] = ()
    #: whether the registrar's last registration stands (the kubelet or host accepted it)
    registered: bool = False
    #: the registrar's last failure ("" after a success)
    last_error: str = ""

    @property
    def healthy(self) -> int:
        """How many of its devices are healthy (what the kubelet counts allocatable)."""
        return sum(1 for d in self.devices if d.healthy)
