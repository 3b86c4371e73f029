"""The memory manager as a daemon component: read the machine, restore, publish, re-read.

Start: read every NUMA node's memory and hugepage pools (``[daemon] sysfs_root``),
build the per-node capacity from the ``[memory]`` reservations (a reservation the
machine cannot hold stops start with the reason: a config to fix, not a file to
delete), load the saved assignments (a corrupt file stops start unless
``accept_state_loss``), and take back those that still fit; each one that no
longer fits (memory removed, pages freed while hwagent was down) is left out and
reported per pod ("memory placement dropped"), then a fresh snapshot is written.
Publishes ``MEMORY_MANAGER`` before admission starts.

Running: the machine is re-read every ``rescan_interval_s`` (memory is hot-plugged
in 128 MiB blocks on some machines, hugepage pools are resized through
``nr_hugepages``); a changed capacity is reconciled the same way. Admission also asks
for a re-read (``MemoryManager.refresh``) when a request does not fit, so pages reserved
a moment ago count for the next launch. Pods the
active-pods source (admission, a deferred ``ACTIVE_PODS``) has not known for
``residual_cleanup_s`` are released, as the CPU policy's residual cleanup does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from agent.contracts import ACTIVE_PODS, MEMORY_MANAGER, ActivePods, DaemonContext, Deferred
from agent.cpu.periodic import ResidualTracker
from agent.daemonconfig import DAEMON_SECTION
from agent.eventlog import get_logger
from agent.memory.checkpoint import FILE_NAME, CheckpointError, MemoryStore
from agent.memory.config import MEMORY_SECTION, MemoryConfig
from agent.memory.manager import Dropped, MemoryManager
from agent.memory.policy import Capacity, StaticPolicy, build_capacity
from agent.memory.sysfs import read_memory

__all__ = ["MemoryComponent", "create", "report_dropped"]

log = get_logger("hwagent.memory")


def report_dropped(dropped: Dropped, when: str) -> None:
    """One event per container a reconciliation left out, naming the pod and why."""
    for a, why in dropped:
        log.warning("memory placement dropped", pod_uid=a.pod_uid, pod=f"{a.pod_namespace}/{a.pod_name}",
                    container=a.container, why=why, when=when)


class MemoryComponent:
    name = "memory"

    def __init__(self, cfg: MemoryConfig) -> None:
        self.cfg = cfg
        self.manager: MemoryManager
        self.sysfs_root = "/sys"
        self._ctx: DaemonContext | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop_errors = 0
        #: what the last reconciliation left out (start or rescan), for status and tests
        self.last_dropped: Dropped = []
        self.residual = ResidualTracker(cfg.residual_cleanup_s)
        self._active_pods: Deferred[ActivePods] = lambda: None

    def capacity(self) -> dict[int, dict[str, Capacity]]:
        machine = read_memory(self.sysfs_root)
        for w in machine.warnings:
            log.warning("memory reader warning", warning=w)
        if not machine.nodes:
            raise RuntimeError(f"memory manager cannot start: no NUMA node memory under {self.sysfs_root} "
                               f"({'; '.join(machine.warnings) or 'nothing found'}); set [memory] enabled = false")
        try:
            return build_capacity(machine, self.cfg.reserved(), self.cfg.system_hugepages())
        except ValueError as e:
            raise RuntimeError(f"memory manager cannot start: [memory] {e}") from None

    async def start(self, ctx: DaemonContext) -> None:
        self._ctx = ctx
        self._active_pods = ctx.deferred(ACTIVE_PODS)
        self.sysfs_root = ctx.config[DAEMON_SECTION].sysfs_root
        loop = asyncio.get_running_loop()
        capacity = await loop.run_in_executor(None, self.capacity)
        store = MemoryStore(ctx.path("memory", FILE_NAME).parent)
        try:
            saved = await loop.run_in_executor(None, store.load, self.cfg.accept_state_loss)
        except CheckpointError as e:
            raise RuntimeError(str(e)) from None
        policy = StaticPolicy(capacity)
        dropped = policy.restore(saved)
        gone = {a.pod_uid for a, _ in dropped}
        for a in [a for uid in gone for a in policy.held(uid)]:
            policy._drop(a)
            dropped.append((a, "another container of its pod no longer fits"))
        report_dropped(dropped, "start")
        self.last_dropped = dropped
        self.manager = MemoryManager(policy, store)
        self.manager.rescan = self.rescan_once
        await loop.run_in_executor(None, store.save, dict(policy.assignments), lambda: dict(self.manager.policy.assignments))
        ctx.publish(MEMORY_MANAGER, self.manager)
        self._task = loop.create_task(self._rescan_loop())
        log.info("memory manager started", nodes=len(capacity), containers=len(policy.assignments),
                 dropped=len(dropped), resources=",".join(sorted({r for c in capacity.values() for r in c})))

    async def rescan_once(self) -> Dropped:
        """Re-read the machine; reconcile when the capacity changed."""
        capacity = await asyncio.get_running_loop().run_in_executor(None, self.capacity)
        if capacity == self.manager.policy.capacity:
            return []
        log.info("memory capacity changed", nodes=len(capacity))
        dropped = self.manager.reconcile(capacity)
        report_dropped(dropped, "rescan")
        self.last_dropped = dropped
        if self.manager.store is not None:
            await self.manager.store.journal.drain()
        return dropped

    async def residual_once(self, now: float | None = None) -> list[str]:
        """Release the pods admission has not known for ``residual_cleanup_s``."""
        source = self._active_pods()
        if source is None:
            return []
        due = self.residual.due(self.manager.policy.pod_uids(), source.active_pod_uids(),
                                time.time() if now is None else now)
        for uid in due:
            log.info("residual pod removed", pod_uid=uid, after_s=f"{self.cfg.residual_cleanup_s:g}")
            await self.manager.release_pod(uid)
            self.residual.forget(uid)
        return due

    async def _rescan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.rescan_interval_s)
            try:
                await self.rescan_once()
                await self.residual_once()
                self._loop_errors = 0
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a periodic pass must not kill the loop
                self._loop_errors += 1
                log.exception("memory rescan failed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if hasattr(self, "manager") and self.manager.store is not None:
            journal = self.manager.store.journal
            with contextlib.suppress(Exception):
                await journal.drain()
            with contextlib.suppress(Exception):  # a clean stop leaves one checksummed snapshot
                await journal.compact_now()
            with contextlib.suppress(Exception):
                await journal.close()
        if self._ctx is not None:
            self._ctx.withdraw(MEMORY_MANAGER)

    def healthy(self) -> bool:
        return self._loop_errors == 0


def create(ctx: DaemonContext) -> MemoryComponent | None:
    cfg: MemoryConfig = ctx.config[MEMORY_SECTION]
    if not cfg.enabled or cfg.policy == "none":
        return None
    return MemoryComponent(cfg)
