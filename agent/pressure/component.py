"""The pressure component: probes + health + eviction on the daemon's loop.

The BPF compile (~0.5 s, blocking) and each tick (map reads, file reads, and in
standalone mode a cgroup kill) run in an executor; the releases that touch
other components' state (cpu_policy.remove_pod, devicemanager.release_pod) are
sent back to the loop so those components keep a single owner.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from prometheus_client import REGISTRY

from agent.component import DaemonContext
from agent.pressure.actions import StandaloneEviction
from agent.pressure.engine import PressureEngine
from agent.pressure.metrics import PressureCollector

log = logging.getLogger("hwagent.pressure")

__all__ = ["PressureComponent", "factory"]


class _LoopServices:
    """ctx.services, live (components may publish later), with calls run on the loop."""

    def __init__(self, services: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
        self._services = services
        self._loop = loop

    def get(self, key: str, default: Any = None) -> Any:
        svc = self._services.get(key, default)
        return None if svc is None else _OnLoop(svc, self._loop)


class _OnLoop:
    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._t, self._loop = target, loop

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._t, name)

        def call(*a: Any, **kw: Any) -> Any:
            async def run() -> Any:
                return fn(*a, **kw)

            return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=10)

        return call


class PressureComponent:
    name = "pressure"

    def __init__(self) -> None:
        self.engine: PressureEngine | None = None
        self._task: asyncio.Task | None = None
        self._collector: PressureCollector | None = None
        self._failed = False

    async def start(self, ctx: DaemonContext) -> None:
        cfg = ctx.config["pressure"]
        dcfg = ctx.config["daemon"]
        loop = asyncio.get_running_loop()
        action = None
        if ctx.mode == "standalone":
            action = StandaloneEviction(_LoopServices(ctx.services, loop), dcfg.procfs_root)
        self.engine = PressureEngine(
            cfg,
            ctx.services,
            mode=ctx.mode,
            record_path=ctx.path("pressure", "evictions.jsonl"),
            procfs_root=dcfg.procfs_root,
            sysfs_root=dcfg.sysfs_root,
            action=action,
        )
        await loop.run_in_executor(None, self.engine.load)
        ctx.services["pressure"] = self.engine  # read by the eviction plugin (kubelet mode) and status
        self._collector = PressureCollector(self.engine)
        REGISTRY.register(self._collector)
        self._task = asyncio.create_task(self._run(cfg.interval_s), name="pressure")

    async def _run(self, interval: float) -> None:
        loop = asyncio.get_running_loop()
        assert self.engine is not None
        while True:
            try:
                await loop.run_in_executor(None, self.engine.tick)
                self._failed = False
            except Exception:
                self._failed = True
                log.exception("pressure_tick_failed")
            await asyncio.sleep(interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._collector is not None:
            REGISTRY.unregister(self._collector)
            self._collector = None
        if self.engine is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.engine.close)

    def healthy(self) -> bool:
        return self._task is not None and not self._task.done() and not self._failed


def factory(ctx: DaemonContext) -> PressureComponent | None:
    return PressureComponent() if ctx.config["pressure"].enabled else None
