"""The devices component: inventory + rules + hotplug + one plugin server and
registrar per resource, and the health board. It is the single owner of
that state, on the daemon's event loop.

Flow: (cold start | uevent) -> re-read inventory -> assign to resources
(sticky for devices whose driver went away) -> per resource, a snapshot of
PluginDevice (rule health x board health) -> DevicePluginServer.update.

Publishes ``DEVICE_HEALTH`` (the board, a ``DeviceHealth``) and
``DEVICE_PLUGINS`` (this component, a ``DevicePlugins``: ``plugin_states()``, the
values the live resources view of ``hwagent status`` reads; the servers and
registrars stay here). Looks up nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from agent.contracts import DEVICE_HEALTH, DEVICE_PLUGINS
from agent.contracts.plugins import PluginDeviceState, PluginState
from agent.devices.config import DevicesConfig, ResourceRule
from agent.devices.hotplug import HotplugMonitor, UEvent
from agent.devices.model import Device, Inventory
from agent.devices.rules import Assignment, assign, effective_rules, offered_nodes, offered_through
from agent.devices.sysfs import PCI_ADDRESS, read_device
from agent.devices.udev import discover
from agent.deviceplugin.health import HealthBoard
from agent.deviceplugin.registration import Registrar
from agent.deviceplugin.server import DevicePluginServer, PluginDevice, socket_name
from agent.eventlog import get_logger

if TYPE_CHECKING:
    from agent.contracts import DaemonContext

__all__ = ["DevicePluginsComponent"]

log = get_logger("hwagent.deviceplugin")



def _nodes(rule: ResourceRule, device: Device) -> tuple[str, ...]:
    """Host paths of the device's nodes the rule hands out (its ``dev_nodes`` kinds)."""
    return tuple(n.path for n in device.nodes_of(rule.dev_nodes))


def plugin_state(plugin: DevicePluginServer, registrar: Registrar | None) -> PluginState:
    """What status shows of one plugin, copied out of its server and registrar."""
    return PluginState(
        resource=plugin.resource,
        socket=plugin.socket_path,
        devices=tuple(PluginDeviceState(d.id, d.healthy, d.reason, d.device.numa_node, _nodes(plugin.rule, d.device))
                      for _, d in sorted(plugin.devices.items())),
        registered=registrar is not None and registrar.registered.is_set(),
        last_error=registrar.last_error if registrar is not None else "",
    )


class DevicePluginsComponent:
    name = "deviceplugins"

    def __init__(self, cfg: DevicesConfig, *, sysfs_root: str = "/sys", plugin_dir: str | Path,
                 registration_socket: str | Path, hotplug: bool | None = None,
                 hotplug_source: str | None = None) -> None:
        self.cfg = cfg
        self.rules: dict[str, ResourceRule] = {r.name: r for r in effective_rules(cfg)}
        #: resources offered through DRA (``api = "dra"``): assigned (so conflicts stay visible) and
        #: health-tracked for the DRA health stream, but never served by a plugin
        self.dra_resources = offered_through(self.rules.values(), "dra")
        self.sysfs_root = sysfs_root
        self.plugin_dir = Path(plugin_dir)
        self.registration_socket = Path(registration_socket)
        self.hotplug_enabled = cfg.hotplug and sysfs_root == "/sys" if hotplug is None else hotplug
        self.hotplug_source = hotplug_source
        self.inventory = Inventory()
        self.assignment = Assignment()
        self.plugins: dict[str, DevicePluginServer] = {}
        self.registrars: dict[str, Registrar] = {}
        self.board = HealthBoard(self._resolve, self._board_changed)
        self.refreshes = 0
        #: whether the last uevent batch was applied by re-reading only the devices it named
        self.incremental = False
        self._monitor: HotplugMonitor | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self._started = False

    # -- lifecycle --------------------------------------------------------------

    async def start(self, ctx: DaemonContext | None = None) -> None:
        self.inventory = discover(self.sysfs_root, self.cfg.dev_root)
        self.assignment = assign(self.inventory, self.rules.values())
        # at start a conflicting config is an operator error: refuse loudly
        self.assignment.raise_conflicts()
        if ctx is not None:
            ctx.publish(DEVICE_HEALTH, self.board)
            ctx.publish(DEVICE_PLUGINS, self)
        self._started = True
        for resource in self.assignment.members:
            if resource not in self.dra_resources:
                await self._ensure_plugin(resource)
        self._push()
        if self.hotplug_enabled:
            self._monitor = HotplugMonitor(self._on_uevents, source=self.hotplug_source)
            self._monitor.start()
        log.info(
            "devices started", devices=len(self.inventory), resources=",".join(self.assignment.members) or "-",
            plugin_dir=self.plugin_dir, registration=self.registration_socket, hotplug=self.hotplug_enabled,
        )

    async def stop(self) -> None:
        self._started = False
        if self._monitor is not None:
            self._monitor.stop()
            self._monitor = None
        for t in list(self._pending):
            t.cancel()
        for r in self.registrars.values():
            await r.stop()
        for p in self.plugins.values():
            await p.stop(grace=0.2)
        self.registrars.clear()
        self.plugins.clear()

    def healthy(self) -> bool:
        return self._started and all(p.serving() for p in self.plugins.values())

    def plugin_states(self) -> list[PluginState]:
        """Each live plugin as a value, by resource (``DevicePlugins``): read when status asks."""
        return [plugin_state(p, self.registrars.get(r)) for r, p in sorted(self.plugins.items())]

    def dra_states(self) -> list[PluginState]:
        """The resources offered through DRA, by resource, with their devices' health (rule and
        board joined, as a plugin's snapshot would say): what the DRA health stream sends. No
        plugin serves them, so ``socket`` is empty and nothing is registered."""
        return [PluginState(r, Path(), tuple(PluginDeviceState(d.id, d.healthy, d.reason, d.device.numa_node,
                                                               _nodes(self.rules[r], d.device))
                                             for d in sorted(self._snapshot(r), key=lambda d: d.id)))
                for r in sorted(self.dra_resources & self.assignment.members.keys())] if self._started else []

    def device_nodes(self) -> tuple[str, ...]:
        """The nodes of every device the rules offer, through a plugin or DRA (``DevicePlugins``):
        the runtime denies each to every container not given it."""
        return offered_nodes(self.inventory, self.rules.values(), self.assignment) if self._started else ()

    # -- plugins ------------------------------------------------------------------

    async def _ensure_plugin(self, resource: str) -> None:
        if resource in self.plugins or not self._started:
            return
        plugin = DevicePluginServer(self.rules[resource], self.plugin_dir / socket_name(resource))
        self.plugins[resource] = plugin
        plugin.update(self._snapshot(resource))
        try:
            await plugin.start()
        except (OSError, RuntimeError, ValueError) as e:
            del self.plugins[resource]
            log.error("plugin start failed", resource=resource, socket=plugin.socket_path, error=e)
            if not self.refreshes:
                raise  # at daemon start: fail loudly
            return
        reg = Registrar(plugin, self.registration_socket, backoff_initial_s=self.cfg.register_backoff_initial_s,
                        backoff_max_s=self.cfg.register_backoff_max_s,
                        check_interval_s=self.cfg.socket_check_interval_s)
        self.registrars[resource] = reg
        reg.start()

    def _snapshot(self, resource: str) -> list[PluginDevice]:
        out = []
        for dev_id in self.assignment.members.get(resource, ()):
            dev = self.inventory.get(dev_id)
            if dev is None:
                continue
            rule_reason = self.assignment.unhealthy.get(dev_id, "")
            ok, board_reason = self.board.health_of(dev_id)
            reason = "; ".join(r for r in (rule_reason, board_reason) if r)
            out.append(PluginDevice(dev, healthy=ok and not rule_reason, reason=reason))
        return out

    def _push(self, resources: set[str] | None = None) -> None:
        for resource, plugin in self.plugins.items():
            if resources is None or resource in resources:
                if plugin.update(self._snapshot(resource)):
                    log.info(
                        "snapshot updated", resource=resource, devices=len(plugin.devices), version=plugin.version,
                    )

    # -- inventory ---------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read all of sysfs and bring every plugin's snapshot up to date."""
        self._apply(discover(self.sysfs_root, self.cfg.dev_root))

    def _apply(self, inv: Inventory) -> None:
        new = assign(inv, self.rules.values(), self.assignment.owner_map())
        for dev_id, rs in new.conflicts.items():
            if dev_id not in self.assignment.conflicts:
                log.error("device rule conflict", device=dev_id, resources=",".join(rs), note="device offered by none")
        for dev_id, why in new.unhealthy.items():
            if self.assignment.unhealthy.get(dev_id) != why:
                log.warning("device unhealthy by rule", device=dev_id, reason=why)
        self.inventory, self.assignment = inv, new
        self.board.forget(inv.devices)
        self.refreshes += 1
        for resource in new.members:
            if resource not in self.plugins and resource not in self.dra_resources:
                t = asyncio.get_running_loop().create_task(self._ensure_plugin(resource))
                self._pending.add(t)
                t.add_done_callback(self._pending.discard)
        self._push()

    def _changes_for(self, events: list[UEvent]) -> dict[str, Device | None] | None:
        """Devices to re-read for these events, or None when only a full read is safe.

        A block/net device also changes its PCI parent's children, and a
        drm/vfio/nvme node changes its PCI function's nodes, so the parent
        function is re-read with it."""
        changes: dict[str, Device | None] = {}
        for ev in events:
            if ev.subsystem in ("pci", "block", "net"):
                dev = read_device(self.sysfs_root, ev.subsystem, ev.name, self.cfg.dev_root)
                if dev is None and ev.subsystem == "block" and ev.name not in self.inventory:
                    continue  # a partition
                if dev is not None or ev.action == "remove":
                    changes[ev.name] = dev
                elif ev.name in self.inventory:
                    return None  # says it exists, sysfs disagrees: re-read everything
            parent = next((p for p in reversed(ev.devpath.split("/")[:-1]) if PCI_ADDRESS.match(p)), None)
            if parent is not None and parent not in changes:
                changes[parent] = read_device(self.sysfs_root, "pci", parent, self.cfg.dev_root)
            elif ev.subsystem not in ("pci", "block", "net") and parent is None:
                return None
        return changes

    def _on_uevents(self, events: list[UEvent]) -> None:
        changes = self._changes_for(events)
        self.incremental = changes is not None
        if changes is None:
            self.refresh()
        elif changes:
            self._apply(self.inventory.with_changes(changes))

    # -- health board glue ---------------------------------------------------------

    def _resolve(self, kind: str, key: str) -> list[tuple[str, str]]:
        owner = self.assignment.owner_map()
        hits: dict[str, str] = {}
        for dev in self.inventory.lookup(kind, key):
            for cand in (dev.id, dev.parent_pci):
                if cand and cand in owner:
                    hits[cand] = owner[cand]
            if kind == "pci":
                for child in self.inventory:
                    if child.parent_pci == dev.id and child.id in owner:
                        hits[child.id] = owner[child.id]
        return [(res, d) for d, res in sorted(hits.items())]

    def _board_changed(self, resources: set[str]) -> None:
        self._push(resources)
