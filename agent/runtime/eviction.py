"""The pressure engine's standalone eviction action, acting on the workloads hwagent runs.

``execute`` is called from the pressure tick (an executor thread). When no
runtime runs in this daemon it hands over to the fallback (the engine's
kill-and-release action for processes launched by others). Otherwise it refuses
any pod whose cgroups are not the runtime's (``owns_cgroup``): hwagent never
signals a process it did not start. For its own pods it asks the runtime, on
the daemon's loop, to evict: SIGTERM, the pod's grace period, kill of the
cgroup, phase Failed with reason ``Evicted`` and the evidence as message;
admission releases the CPUs and devices on that terminal status. The tick does
not wait out the grace period: the outcome says the eviction began, the pod's
status (``hwagent ps``/``describe``) says how it ended.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from agent.cgroups.paths import mount_suffixes
from agent.contracts import PodRuntime
from agent.eventlog import get_logger
from agent.pressure.actions import EvictionAction
from agent.pressure.eviction import Eviction

__all__ = ["RuntimeEviction", "eviction_message"]

log = get_logger("hwagent.runtime")


def eviction_message(ev: Eviction) -> str:
    evidence = json.dumps(dict(ev.evidence), sort_keys=True, default=str)
    return f"{ev.reason} ({ev.signal}) in pool {ev.pool}: {evidence}"


class RuntimeEviction:
    name = "standalone"

    def __init__(self, runtime: Callable[[], PodRuntime | None], loop: asyncio.AbstractEventLoop,
                 fallback: EvictionAction | None = None, timeout_s: float = 10.0) -> None:
        self._runtime = runtime
        self._loop = loop
        self._fallback = fallback
        self.timeout_s = timeout_s

    def execute(self, ev: Eviction, cgroup_paths: list[str]) -> dict[str, Any]:
        rt = self._runtime()
        if rt is None:
            # no runtime in this daemon (disabled): processes someone else launched, the
            # engine's own kill-and-release path
            if self._fallback is not None:
                return self._fallback.execute(ev, cgroup_paths)
            return {"evicted": False, "refused": "no workload runtime in this daemon"}
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


    def finish(self, ev: Eviction, outcome: dict[str, Any]) -> None:
        """On the loop, after ``execute``: a pod the runtime evicts releases its CPUs and
        devices through admission when it reaches its terminal phase, so nothing to do
        here; a pod the fallback killed is released by the fallback."""
        if outcome.get("via") != "runtime" and self._fallback is not None and self._runtime() is None:
            self._fallback.finish(ev, outcome)


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
