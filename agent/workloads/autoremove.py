"""Pods the daemon removes: ``hwagent launch --rm`` without ``--wait`` (as ``docker run --rm -d``)
once they end, and ended pods past the retention rule (``agent.workloads.retention``).

A pod launched so carries the annotation ``REMOVE_ON_EXIT``; when the registry
reports it terminal (it exited, failed, was stopped or evicted) the daemon
removes it as ``hwagent rm`` would (stop if needed, release, remove its logs,
forget). The CLI that launched it may be long gone: the
intent lives in the pod's record, so it survives the CLI and a daemon restart (at
start every terminal pod that carries it is removed). With ``--wait --rm`` the CLI
removes the pod itself after reading its exit status, and sets no annotation.

Retention: whenever a pod ends (and at start, and periodically when an age is set),
the ended pods that nobody removed are weighed against ``[workloads] ended_pods_*``, and
those ``retention.expired`` names are removed the same way, oldest first. Pods of static
manifests are left out (the manifest file owns them: removing one would make the
manifest directory admit it again), and so are pods being removed already.

``wants_removal`` and ``retention.expired`` are the pure decisions; ``AutoRemover`` is
the thin listener that schedules the removals on the daemon's loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent.eventlog import get_logger
from agent.workloads.errors import AdmissionError
from agent.workloads.registry import DELETED, RegistryEvent
from agent.workloads.retention import Ended, RetentionRule, expired

if TYPE_CHECKING:
    from agent.workloads.store import PodRecord

__all__ = ["REMOVE_ON_EXIT", "wants_removal", "retained", "AutoRemover"]

log = get_logger("hwagent.workloads")

#: the pod annotation (value "true") that asks the daemon to remove the pod once it ended
REMOVE_ON_EXIT = "hwagent.io/remove-on-exit"


def wants_removal(rec: PodRecord) -> bool:
    """A terminal pod that asked to be removed and is not being removed already."""
    return (rec.status.phase.terminal and not rec.removing
            and rec.pod.spec.annotations.get(REMOVE_ON_EXIT) == "true")


def retained(rec: PodRecord) -> bool:
    """An ended pod the retention rule weighs: ended, not being removed, not asked to be
    removed on exit (it goes anyway), admitted through the API (not a static manifest's)."""
    return (rec.status.phase.terminal and not rec.removing and rec.pod.spec.source == "api"
            and rec.pod.spec.annotations.get(REMOVE_ON_EXIT) != "true")


def _ended_at(rec: PodRecord) -> float:
    if rec.status.finished_at is not None:
        return rec.status.finished_at
    return rec.events[-1][0] if rec.events else rec.pod.admitted_at


class AutoRemover:
    """Removes ``wants_removal`` pods, and the ended pods past ``rule``, through
    ``workloads.remove`` (one task per pod at a time)."""

    def __init__(self, workloads: Any, rule: RetentionRule | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        """``rule``: None keeps every ended pod (only ``--rm`` pods are removed)."""
        self.w = workloads
        self.rule = rule or RetentionRule()
        self.clock = clock
        self._tasks: dict[str, asyncio.Task[None]] = {}
        #: log bytes of ended pods, measured once (an ended pod writes no more)
        self._bytes: dict[str, int] = {}
        self._sweep: asyncio.Task[None] | None = None
        self._again = False
        self._timer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.w.registry.listeners.append(self._on_event)
        for rec in self.w.registry.records():  # those that ended while the daemon was down
            if wants_removal(rec):
                self._schedule(rec)
        if not self.rule.off:
            self._sweep_soon()
        if self.rule.max_age_s:
            self._timer = asyncio.get_running_loop().create_task(self._tick(), name="retention-timer")

    async def stop(self) -> None:
        """No new removal; those under way finish (a removal is recorded before it starts, and a
        daemon stopped in the middle finishes it at its next start)."""
        try:
            self.w.registry.listeners.remove(self._on_event)
        except ValueError:
            pass
        for t in (self._timer, self._sweep):
            if t is not None:
                t.cancel()
        waits = [t for t in (self._timer, self._sweep) if t is not None]
        if self._tasks or waits:
            await asyncio.gather(*self._tasks.values(), *waits, return_exceptions=True)

    def _on_event(self, ev: RegistryEvent) -> None:
        if ev.type == DELETED:
            self._bytes.pop(ev.record.uid, None)
            return
        if wants_removal(ev.record):
            self._schedule(ev.record)
        elif ev.record.status.phase.terminal and not self.rule.off:
            self._sweep_soon()

    # --- retention -------------------------------------------------------------------------

    def _sweep_soon(self) -> None:
        """One sweep at a time; an end during a sweep makes it look once more."""
        if self._sweep is not None and not self._sweep.done():
            self._again = True
            return
        self._sweep = asyncio.get_running_loop().create_task(self._retain(), name="retention")

    async def _tick(self) -> None:
        period = min(max(self.rule.max_age_s / 10, 1.0), 60.0)
        while True:
            await asyncio.sleep(period)
            self._sweep_soon()

    async def _retain(self) -> None:
        while True:
            self._again = False
            try:
                await self._retain_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the next end sweeps again
                log.exception("retention sweep failed")
            if not self._again:
                return

    async def _retain_once(self) -> None:
        recs = [r for r in self.w.registry.records() if retained(r)]
        if self.rule.measures_bytes and self.w.logs is not None:
            new = [(r.uid, r.pod.spec.namespace, r.pod.spec.name) for r in recs if r.uid not in self._bytes]
            if new:
                sizes = await asyncio.get_running_loop().run_in_executor(None, _measure, self.w.logs, new)
                self._bytes.update(sizes)
        ended = [Ended(r.uid, r.pod.spec.owner_uid, _ended_at(r), self._bytes.get(r.uid, 0)) for r in recs]
        for uid, why in expired(ended, self.rule, self.clock()):
            rec = self.w.registry.record(uid)
            if rec is None or not retained(rec) or uid in self._tasks:
                continue  # removed, or restarted under that uid, meanwhile
            log.info("ended pod removed by retention", pod=rec.key, uid=uid, rule=f"ended_pods_{why}")
            self._schedule(rec)

    def _schedule(self, rec: PodRecord) -> None:
        if rec.uid in self._tasks:
            return
        uid = rec.uid
        task = asyncio.get_running_loop().create_task(self._remove(rec), name=f"autoremove-{uid}")
        self._tasks[uid] = task

        def done(_task: asyncio.Task[None]) -> None:
            self._tasks.pop(uid, None)

        task.add_done_callback(done)

    async def _remove(self, rec: PodRecord) -> None:
        spec = rec.pod.spec
        now = self.w.registry.by_name(spec.namespace, spec.name)
        if now is None or now.uid != rec.uid:
            return  # removed meanwhile (and the name perhaps taken by a new pod, which is not this one)
        try:
            await self.w.remove(spec.name, spec.namespace)
        except AdmissionError as e:
            if e.code != "NOT_FOUND":  # removed by someone else meanwhile: nothing to do
                log.warning("pod removal on exit failed", pod=spec.key, error=str(e))
            return
        except Exception as e:  # noqa: BLE001 - one pod's failure must not stop the listener
            log.warning("pod removal on exit failed", pod=spec.key, error=str(e))
            return
        if wants_removal(rec):
            log.info("pod removed on exit", pod=spec.key, phase=rec.status.phase.value)


def _measure(logs: Any, pods: list[tuple[str, str, str]]) -> dict[str, int]:
    """Log bytes per pod uid (blocking: in an executor)."""
    out = {}
    for uid, namespace, name in pods:
        try:
            out[uid] = logs.size(namespace, name)
        except OSError:
            out[uid] = 0
    return out
