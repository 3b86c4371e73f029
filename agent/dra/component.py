"""Daemon component: the DRA driver (both modes). Publishes ``DRA_DRIVER`` (the
``ClaimPreparer`` the kubelet's DRAPlugin service and the views use) and, in
standalone mode, ``DRA_POD_CLAIMS`` (admission reserves pods' claims through it).

The node's devices are read when a claim is prepared or allocated (sysfs
inventory, the ``[devices]`` rules, names and attributes from
``agent.dra.slices``), so a device plugged in since start is allocatable. Its
state lives in ``<root>/dra-state/prepared.json``; claims and classes are the
files in ``<root>/dra/``; CDI specs go to ``[dra] cdi_dir``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agent.contracts import DRA_DRIVER, DaemonContext
from agent.contracts.dra import DRA_POD_CLAIMS
from agent.daemonconfig import DAEMON_SECTION
from agent.devices.config import DEVICES_SECTION
from agent.dra.config import DRA_SECTION, DraConfig
from agent.eventlog import get_logger

__all__ = ["DraComponent", "factory", "STATE_DIR", "STATE_FILE"]

log = get_logger("hwagent.dra")
STATE_DIR = "dra-state"
STATE_FILE = "prepared.json"
#: how long one reading of the node's devices serves prepares and allocations
NODE_TTL_S = 1.0


class DraComponent:
    name = "dra"

    def __init__(self, cfg: DraConfig) -> None:
        self.cfg = cfg
        self.driver: Any = None
        self.pod_claims: Any = None
        self._ctx: DaemonContext | None = None
        self._node_cache: tuple[float, Any] | None = None

    def node_devices(self) -> Any:
        """The node's DRA devices (inventory read from sysfs, rules applied), read again when the
        last reading is older than ``NODE_TTL_S``: a burst of prepares (one NodePrepareResources
        of many claims, a pod with several) scans sysfs once, a hot-plug is seen within a second."""
        now = time.monotonic()
        cached = self._node_cache
        if cached is not None and now - cached[0] < NODE_TTL_S:
            return cached[1]
        node = self._read_node_devices()
        self._node_cache = (now, node)
        return node

    def _read_node_devices(self) -> Any:
        from agent.devices.rules import assign, effective_rules
        from agent.devices.sysfs import read_inventory
        from agent.dra.catalog import catalog
        from agent.dra.driver import NodeDevices
        from agent.dra.slices import block_sizes, local_node_name

        assert self._ctx is not None
        dcfg = self._ctx.config[DEVICES_SECTION]
        inv = read_inventory(self._ctx.config[DAEMON_SECTION].sysfs_root, dcfg.dev_root)
        rules = effective_rules(dcfg)
        a = assign(inv, rules)
        return NodeDevices(inv, {r.name: r for r in rules},
                           catalog(inv, a, local_node_name(), self.cfg.driver_name, block_sizes(inv)))

    async def start(self, ctx: DaemonContext) -> None:
        from agent.dra.driver import DraDriver
        from agent.dra.files import ClaimFiles
        from agent.dra.podclaims import PodClaimService
        from agent.dra.source import FileClaimSource

        self._ctx = ctx
        self.driver = DraDriver(self.cfg.driver_name, ctx.root_dir / STATE_DIR / STATE_FILE, self.cfg.cdi_dir,
                                FileClaimSource(ctx.root_dir), self.node_devices)
        done = await asyncio.to_thread(self.driver.restore)
        ctx.publish(DRA_DRIVER, self.driver)
        if ctx.mode == "standalone":
            self.pod_claims = PodClaimService(self.driver, ClaimFiles(ctx.root_dir), self.node_devices)
            ctx.publish(DRA_POD_CLAIMS, self.pod_claims)
        log.info("dra driver started", driver=self.cfg.driver_name, cdi_dir=self.cfg.cdi_dir,
                 prepared=len(self.driver.prepared()), restored=len(done))

    async def stop(self) -> None:
        if self._ctx is not None:
            self._ctx.withdraw(DRA_DRIVER)
            if self.pod_claims is not None:
                self._ctx.withdraw(DRA_POD_CLAIMS)

    def healthy(self) -> bool:
        return self.driver is not None and not self.driver.state_error


def factory(ctx: DaemonContext) -> DraComponent | None:
    cfg = ctx.config[DRA_SECTION]
    return DraComponent(cfg) if cfg.enabled else None
