"""Pods removed by the daemon when they end: ``hwagent launch --rm`` without ``--wait`` (as ``docker run --rm -d``).

A pod launched so carries the annotation ``REMOVE_ON_EXIT``; when the registry
reports it terminal (it exited, failed, was stopped or evicted) the daemon
removes it as ``hwagent rm`` would (stop if needed, release, forget; the log
directory stays, as after any rm). The CLI that launched it may be long gone: the
intent lives in the pod's record, so it survives the CLI and a daemon restart (at
start every terminal pod that carries it is removed). With ``--wait --rm`` the CLI
removes the pod itself after reading its exit status, and sets no annotation.

``wants_removal`` is the pure decision; ``AutoRemover`` is the thin listener that
schedules the removals on the daemon's loop.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agent.eventlog import get_logger
from agent.workloads.errors import AdmissionError
from agent.workloads.registry import DELETED, RegistryEvent

if TYPE_CHECKING:
    from agent.workloads.store import PodRecord

__all__ = ["REMOVE_ON_EXIT", "wants_removal", "AutoRemover"]

log = get_logger("hwagent.workloads")

#: the pod annotation (value "true") that asks the daemon to remove the pod once it ended
REMOVE_ON_EXIT = "hwagent.io/remove-on-exit"


def wants_removal(rec: PodRecord) -> bool:
    """A terminal pod that asked to be removed and is not being removed already."""
    return (rec.status.phase.terminal and not rec.removing
            and rec.pod.spec.annotations.get(REMOVE_ON_EXIT) == "true")


class AutoRemover:
    """Removes ``wants_removal`` pods through ``workloads.remove`` (one task per pod at a time)."""

    def __init__(self, workloads: Any) -> None:
        self.w = workloads
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self) -> None:
        self.w.registry.listeners.append(self._on_event)
        for rec in self.w.registry.records():  # those that ended while the daemon was down
            if wants_removal(rec):
                self._schedule(rec)

    async def stop(self) -> None:
        """No new removal; those under way finish (a removal is recorded before it starts, and a
        daemon stopped in the middle finishes it at its next start)."""
        try:
            self.w.registry.listeners.remove(self._on_event)
        except ValueError:
            pass
        if self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def _on_event(self, ev: RegistryEvent) -> None:
        if ev.type != DELETED and wants_removal(ev.record):
            self._schedule(ev.record)

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
        try:
            await self.w.remove(spec.name, spec.namespace)
        except AdmissionError as e:
            if e.code != "NOT_FOUND":  # removed by someone else meanwhile: nothing to do
                log.warning("pod removal on exit failed", pod=spec.key, error=str(e))
            return
        except Exception as e:  # noqa: BLE001 - one pod's failure must not stop the listener
            log.warning("pod removal on exit failed", pod=spec.key, error=str(e))
            return
        log.info("pod removed on exit", pod=spec.key, phase=rec.status.phase.value)
