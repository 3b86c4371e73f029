"""The small interface every long-running part of the daemon implements.

The daemon owns one asyncio loop. Components (device-plugin host, built-in
device plugins, CPU policy, probes) are started in order and stopped in
reverse; each gets the same ``DaemonContext``. Nothing else is shared, so a
component can be started alone in a test with a context built by hand.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agent.config import Config
from agent.topology.model import Topology


@dataclass
class DaemonContext:
    config: Config
    root_dir: Path
    topology: Topology
    #: "standalone" or "kubelet", decided once at start (config mode=auto resolved)
    mode: str = "standalone"
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("hwagent"))
    #: components publish handles here for others (e.g. "devicemanager", "cpu_policy")
    services: dict[str, Any] = field(default_factory=dict)

    def path(self, *parts: str) -> Path:
        """A path under the root dir, created as a directory chain for the parent."""
        p = self.root_dir.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p


@runtime_checkable
class Component(Protocol):
    name: str

    async def start(self, ctx: DaemonContext) -> None:
        """Bring the component up. Raise to abort daemon start with a clear message."""

    async def stop(self) -> None:
        """Release everything start() created (sockets, cgroups it owns, BPF programs)."""

    def healthy(self) -> bool:
        """Whether /healthz should report this component as working."""
