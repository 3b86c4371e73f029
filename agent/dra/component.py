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
#: with an API server: list and compare every slice at least this often (seconds)
RESYNC_S = 300.0
#: the longest wait between publish attempts while the API server fails
MAX_BACKOFF_S = 60.0


class DraComponent:
    name = "dra"

    def __init__(self, cfg: DraConfig) -> None:
        self.cfg = cfg
        self.driver: Any = None
        self.pod_claims: Any = None
        self._ctx: DaemonContext | None = None
        self._node_cache: tuple[float, Any] | None = None
        self._publish_task: asyncio.Task[None] | None = None
        self._publish_state: dict[str, Any] = {"slices": 0, "syncs": 0, "error": ""}

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
        from agent.devices.rules import assign, effective_rules, offered_nodes, offered_through
        from agent.devices.sysfs import read_inventory
        from agent.dra.catalog import catalog
        from agent.dra.driver import NodeDevices
        from agent.dra.slices import block_sizes, build_slices, local_node_name

        assert self._ctx is not None
        dcfg = self._ctx.config[DEVICES_SECTION]
        inv = read_inventory(self._ctx.config[DAEMON_SECTION].sysfs_root, dcfg.dev_root)
        rules = effective_rules(dcfg)
        # every rule takes part in the assignment (a device two rules match stays in neither), but
        # only the resources offered through DRA are the driver's: the others are the device plugins'
        a = assign(inv, rules).restricted_to(offered_through(rules, "dra"))
        node, sizes = local_node_name(), block_sizes(inv)
        return NodeDevices(inv, {r.name: r for r in rules}, catalog(inv, a, node, self.cfg.driver_name, sizes),
                           build_slices(inv, a, node, self.cfg.driver_name, sizes), offered_nodes(inv, rules, a))

    async def start(self, ctx: DaemonContext) -> None:
        from agent.dra.driver import DraDriver
        from agent.dra.files import ClaimFiles
        from agent.dra.podclaims import PodClaimService
        from agent.dra.source import FileClaimSource

        self._ctx = ctx
        source: Any = FileClaimSource(ctx.root_dir)
        if self.api_mode(ctx):
            source = self._start_api()
        self.driver = DraDriver(self.cfg.driver_name, ctx.root_dir / STATE_DIR / STATE_FILE, self.cfg.cdi_dir,
                                source, self.node_devices)
        done = await asyncio.to_thread(self.driver.restore)
        ctx.publish(DRA_DRIVER, self.driver)
        if ctx.mode == "standalone":
            from agent.dra.files import DRA_DIR
            from agent.safepath import ensure_dir

            # root's: the claim files name pods and their devices; operators drop files into a
            # private directory, never one others list (issue 32 item 7; modes only narrow)
            ensure_dir(ctx.root_dir, DRA_DIR, mode=0o700)
            self.pod_claims = PodClaimService(self.driver, ClaimFiles(ctx.root_dir), self.node_devices,
                                              offers=self._offers_devices())
            ctx.publish(DRA_POD_CLAIMS, self.pod_claims)
        log.info("dra driver started", driver=self.cfg.driver_name, cdi_dir=self.cfg.cdi_dir,
                 prepared=len(self.driver.prepared()), restored=len(done))

    def _offers_devices(self) -> bool:
        """Whether any rule offers devices through DRA (without one, nothing to read from sysfs)."""
        from agent.devices.rules import effective_rules, offered_through

        assert self._ctx is not None
        return bool(offered_through(effective_rules(self._ctx.config[DEVICES_SECTION]), "dra"))

    def api_mode(self, ctx: DaemonContext) -> bool:
        """With an API server: kubelet mode and ``[dra] kubeconfig`` set (standalone mode allocates
        claims itself, from its files, with or without a cluster)."""
        return bool(self.cfg.kubeconfig) and ctx.mode == "kubelet"

    def _start_api(self) -> Any:
        """The API server's claim source, and the task that publishes the node's slices. The
        client is imported and made on first use, in a worker thread, never here."""
        from agent.dra.apisource import ApiClaimSource
        from agent.dra.kubeapi import connect
        from agent.dra.publish import SlicePublisher
        from agent.dra.slices import local_node_name

        kubeconfig = self.cfg.kubeconfig
        publisher = SlicePublisher(lambda: connect(kubeconfig), local_node_name(), self.cfg.driver_name)
        self._publish_task = asyncio.create_task(self._publish_loop(publisher), name="dra-publish-slices")
        log.info("dra driver uses the api server", kubeconfig=kubeconfig, node=publisher.node)
        return ApiClaimSource(lambda: connect(kubeconfig))

    async def _publish_loop(self, publisher: Any) -> None:
        """Publish at start, then whenever the node's slices change (a device plugged or
        unplugged, a rule's health), and list everything again every ``RESYNC_S`` (someone may
        have deleted or edited a slice). A failure is reported in ``publisher_state`` and retried
        with a doubling delay up to ``MAX_BACKOFF_S``; the driver keeps serving meanwhile."""
        from agent.dra.kubeapi import KubeError

        last: Any = None
        synced_at = 0.0
        delay = interval = self.cfg.publish_interval_s
        while True:
            try:
                desired = list((await asyncio.to_thread(self.node_devices)).slices)
                if desired != last or time.monotonic() - synced_at >= RESYNC_S:
                    done = await asyncio.to_thread(publisher.sync, desired)
                    last, synced_at = desired, time.monotonic()
                    st = self._publish_state
                    st.update(error="", slices=len(desired), syncs=st["syncs"] + 1)
                    if done["created"] or done["updated"] or done["deleted"]:
                        log.info("dra resourceslices published", created=done["created"], updated=done["updated"],
                                 deleted=done["deleted"])
                delay = interval
            except (KubeError, OSError) as e:
                if str(e) != self._publish_state["error"]:
                    log.warning("dra resourceslices not published", error=e, retry_s=delay)
                self._publish_state["error"] = str(e)
                last = None
                delay = min(delay * 2, MAX_BACKOFF_S)
            except Exception as e:  # noqa: BLE001 - a bug; the loop must outlive it (logged, retried)
                log.error("dra resourceslices publish failed unexpectedly", error=repr(e), bug="in hwagent", retry_s=delay)
                self._publish_state["error"] = repr(e)
                last = None
                delay = min(delay * 2, MAX_BACKOFF_S)
            await asyncio.sleep(delay)

    def publisher_state(self) -> dict[str, Any]:
        """Slices last published, syncs done, the last error ('' once a sync succeeds)."""
        return dict(self._publish_state)

    async def stop(self) -> None:
        if self._publish_task is not None:
            self._publish_task.cancel()
            try:
                await self._publish_task
            except asyncio.CancelledError:
                pass
            self._publish_task = None
        if self._ctx is not None:
            self._ctx.withdraw(DRA_DRIVER)
            if self.pod_claims is not None:
                self._ctx.withdraw(DRA_POD_CLAIMS)

    def healthy(self) -> bool:
        return self.driver is not None and not self.driver.state_error


def factory(ctx: DaemonContext) -> DraComponent | None:
    cfg = ctx.config[DRA_SECTION]
    return DraComponent(cfg) if cfg.enabled else None
