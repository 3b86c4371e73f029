"""The runtime's ``Evictor`` (``EVICTOR``, standalone mode): pressure evictions of the pods hwagent runs.

``execute`` is called from the pressure tick (an executor thread). It refuses
any pod whose cgroups are not the runtime's (``owns_cgroup``): hwagent never
signals a process it did not start. For its own pods it asks the runtime, on
the daemon's loop, to evict: SIGTERM, the pod's grace period, kill of the
cgroup, phase Failed with reason ``Evicted`` and the evidence as message;
admission releases the CPUs and devices on that terminal status, the one
release route. The tick does not wait out the grace period: the outcome says
the eviction began, the pod's status (``hwagent ps``/``describe``) says how it
ended.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent.cgroups.paths import mount_suffixes
from agent.contracts import PodRuntime
from agent.eventlog import get_logger
from agent.contracts.pressure import Eviction

__all__ = ["RuntimeEviction", "eviction_message"]

log = get_logger("hwagent.runtime")


def eviction_message(ev: Eviction) -> str:
    evidence = json.dumps(dict(ev.evidence), sort_keys=True, default=str)
    return f"{ev.reason} ({ev.signal}) in pool {ev.pool}: {evidence}"


class RuntimeEviction:
    """Implements ``agent.contracts.Evictor``; the runtime component publishes it."""

    name = "runtime"

    def __init__(self, runtime: PodRuntime, loop: asyncio.AbstractEventLoop, timeout_s: float = 10.0) -> None:
        self._runtime = runtime
        self._loop = loop
        self.timeout_s = timeout_s

    def accepting(self) -> bool:
        return True

    def execute(self, ev: Eviction, cgroup_paths: list[str]) -> dict[str, Any]:
        rt = self._runtime
        foreign = [p for p in cgroup_paths if not _owned(rt, p)]
        if not cgroup_paths or foreign:
            log.warning(
                "eviction refused", pod=ev.pod_uid, cgroups=",".join(foreign or cgroup_paths) or "-",
                reason="not a workload hwagent runs",
            )
            return {"evicted": False, "refused": "not a workload hwagent runs", "cgroups": foreign or cgroup_paths}
        message = eviction_message(ev)

        async def begin() -> None:
            task = asyncio.get_running_loop().create_task(rt.evict(ev.pod_uid, message), name=f"evict-{ev.pod_uid}")
            task.add_done_callback(_log_failure)

        if _on_loop(self._loop):
            self._loop.create_task(begin())
        else:
            asyncio.run_coroutine_threadsafe(begin(), self._loop).result(self.timeout_s)
        return {"evicted": True, "via": "runtime", "cgroups": cgroup_paths}


def _owned(rt: PodRuntime, path: str) -> bool:
    """Whether a cgroup path (relative, or absolute under a controller mount) is the runtime's."""
    if rt.owns_cgroup(path):
        return True
    # /sys/fs/cgroup/<controller>/<rel> or /sys/fs/cgroup/<rel> (v2)
    return any(rt.owns_cgroup(rel) for rel in mount_suffixes(path))


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("eviction failed", error=repr(task.exception()))
