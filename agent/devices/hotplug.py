"""Kernel uevents -> the asyncio loop.

A pyudev netlink monitor's socket is registered with ``loop.add_reader``, so
events are handled on the daemon's one loop without a thread. The "kernel"
source works without udevd (this project's VMs and containers have none);
the "udev" source is used when udevd runs, because its events arrive after
udev has created the /dev nodes a container would be given.

The monitor only says *that* something changed; the owner re-reads the
inventory (a few ms of sysfs reads), which keeps one code path for cold start
and hotplug and cannot drift from what sysfs says.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyudev
from prometheus_client import Counter

from agent.eventlog import get_logger

__all__ = ["UEvent", "HotplugMonitor", "SUBSYSTEMS", "default_source"]

log = get_logger("hwagent.devices")

UEVENTS = Counter("hwagent_devices_uevents_total", "Kernel uevents received by the hotplug monitor",
                  ["subsystem", "action"])

#: subsystems whose events can change the inventory (drm/nvme/vfio children
#: appear and go with their PCI function's bind/unbind)
SUBSYSTEMS = ("pci", "block", "net", "drm", "vfio", "nvme")


@dataclass(frozen=True)
class UEvent:
    action: str  # add, remove, change, bind, unbind, move, online, offline
    subsystem: str
    name: str  # sys_name: "0000:3b:00.0", "loop0", "dummy0"
    devpath: str
    seqnum: int


def default_source() -> str:
    """"udev" when udevd is running (its control socket exists), else "kernel"."""
    return "udev" if os.path.exists("/run/udev/control") else "kernel"


#: uevent socket buffer: room for a burst of a few thousand events
RECEIVE_BUFFER_BYTES = 8 * 1024 * 1024


class HotplugMonitor:
    def __init__(self, on_events: Callable[[list[UEvent]], None], *,
                 subsystems: Sequence[str] = SUBSYSTEMS, source: str | None = None) -> None:
        self._on_events = on_events
        self._subsystems = tuple(subsystems)
        self.source = source or default_source()
        self._monitor: pyudev.Monitor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        ctx = pyudev.Context()
        mon = pyudev.Monitor.from_netlink(ctx, source=self.source)
        for s in self._subsystems:
            mon.filter_by(s)
        # a burst (hundreds of VFs created at once) must not overflow the socket; libudev
        # forces the size (SO_RCVBUFFORCE), which needs CAP_NET_ADMIN: without it the
        # kernel's default buffer stays, and an overflow is caught as ENOBUFS (rescan)
        try:
            mon.set_receive_buffer_size(RECEIVE_BUFFER_BYTES)
        except PermissionError:
            log.warning(
                "hotplug receive buffer default",
                reason="no CAP_NET_ADMIN to enlarge the uevent socket buffer; a burst of uevents may overflow it",
            )
        mon.start()
        self._loop = loop or asyncio.get_running_loop()
        self._loop.add_reader(mon.fileno(), self._drain)
        self._monitor = mon
        log.info("hotplug started", source=self.source, subsystems=",".join(self._subsystems))

    def _drain(self) -> None:
        mon = self._monitor
        if mon is None:
            return
        events: list[UEvent] = []
        while True:
            try:
                dev = mon.poll(timeout=0)
            except (OSError, pyudev.DeviceNotFoundError) as e:  # pragma: no cover - kernel hiccup
                log.warning("hotplug receive failed", error=e)
                break
            if dev is None:
                break
            events.append(UEvent(dev.action or "", dev.subsystem or "", dev.sys_name,
                                 dev.device_path, int(dev.sequence_number or 0)))
        if events:
            for ev in events:
                UEVENTS.labels(ev.subsystem, ev.action).inc()
                log.debug("uevent", action=ev.action, subsystem=ev.subsystem, name=ev.name, seq=ev.seqnum)
            try:
                self._on_events(events)
            except Exception:  # one bad refresh must not kill the reader
                log.exception("hotplug handler failed", events=len(events))

    def stop(self) -> None:
        if self._monitor is not None and self._loop is not None:
            self._loop.remove_reader(self._monitor.fileno())
        # libudev closes the netlink socket when the monitor is freed
        self._monitor = None
