"""The pressure component: probes + health + eviction on the daemon's loop.

Start returns at once: the BPF compile (0.5-3 s here, minutes under TCG) runs in a
thread of its own while the daemon already serves; the component reports
"loading" until the readers are installed, on the loop. Each tick then reads
the CPU policy's allocations on the loop, hands them to a worker thread for the
readings and decisions (map reads, file reads, the pure trackers), and applies
the result back on the loop: health transitions go to the board (which wakes
ListAndWatch streams through asyncio primitives), an eviction goes to whoever
acts on it (the ``EVICTOR`` handle, asked in a worker thread: the runtime hands
the stop to the loop, and admission releases the pod's CPUs and devices when
it ends), so every other component keeps its single owner and pressure
releases nothing itself.

Publishes ``PRESSURE`` (the engine, a ``PressureSignals``: the eviction plugin
and status read it). Looks up at start, all started before it: ``CPU_POLICY``
(the containers to watch), ``DEVICE_HEALTH`` (where health verdicts go),
``POD_DIRECTORY`` (kubelet mode), and holds a deferred ``EVICTOR`` (published
after pressure by the runtime in standalone mode, the eviction plugin in
kubelet mode; without one an eviction is reported only) and a deferred
``EVICTION_GATE`` (the advisor, when on: an eviction goes ahead only when it allows).
"""

from __future__ import annotations

import asyncio
import gc
import threading

from prometheus_client import REGISTRY

from agent.daemonconfig import DAEMON_SECTION
from agent.cgroups.config import CGROUPS_SECTION, workload_roots
from agent.contracts import CPU_POLICY, DEVICE_HEALTH, EVICTION_GATE, EVICTOR, POD_DIRECTORY, PRESSURE
from agent.contracts import DaemonContext
from agent.eventlog import get_logger
from agent.pressure.config import PRESSURE_SECTION, PressureConfig
from agent.pressure.engine import LIVE_SETTINGS, Loaded, PressureEngine, TickResult
from agent.contracts.pressure import Eviction
from agent.pressure.metrics import PressureCollector
from agent.tasks import cancel_and_wait

log = get_logger("hwagent.pressure")

__all__ = ["PressureComponent", "factory"]


class PressureComponent:
    name = "pressure"

    def __init__(self) -> None:
        self.engine: PressureEngine | None = None
        self._task: asyncio.Task[None] | None = None
        self._collector: PressureCollector | None = None
        self._failed = False
        #: "loading" (probes compiling), "running", "failed" (set-up raised: no readings)
        self.state = "new"
        self.load_seconds: float | None = None
        self._abandon = threading.Event()

    async def start(self, ctx: DaemonContext) -> None:
        cfg = ctx.config[PRESSURE_SECTION]
        dcfg = ctx.config[DAEMON_SECTION]
        roots = workload_roots(ctx.config)
        self.engine = PressureEngine(
            cfg,
            cpu=ctx.lookup(CPU_POLICY),
            device_health=ctx.lookup(DEVICE_HEALTH),
            pod_directory=ctx.lookup(POD_DIRECTORY),
            mode=ctx.mode,
            record_path=ctx.path("pressure", "evictions.jsonl"),
            procfs_root=dcfg.procfs_root,
            sysfs_root=dcfg.sysfs_root,
            cgroup_roots=roots,
            cgroup_hierarchy=ctx.config[CGROUPS_SECTION].hierarchy,
            evictor=ctx.deferred(EVICTOR),
            gate=ctx.deferred(EVICTION_GATE),
        )
        ctx.publish(PRESSURE, self.engine)
        self._collector = PressureCollector(self.engine, lambda: self.state, pod_labels=dcfg.metrics_pod_labels)
        REGISTRY.register(self._collector)
        self.state = "loading"
        self._task = asyncio.create_task(self._load_then_run(), name="pressure")

    # -- set-up in the background -------------------------------------------------
    def _prepare_in_thread(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Loaded]) -> None:
        """Runs in its own daemon thread: a stop during a minutes-long compile under TCG
        must neither wait for it nor keep the process from exiting."""
        assert self.engine is not None
        try:
            loaded = self.engine.prepare()
        except Exception as e:  # handed to the loop, which decides
            result: tuple[Loaded | None, Exception | None] = (None, e)
        else:
            result = (loaded, None)
        if self._abandon.is_set():
            if result[0] is not None and self.engine._own_probes:
                result[0].probes.close()  # nobody will install it
            return

        def deliver() -> None:
            if fut.done():
                if result[0] is not None and self.engine is not None and self.engine._own_probes:
                    result[0].probes.close()
                return
            if result[1] is not None:
                fut.set_exception(result[1])
            else:
                fut.set_result(result[0])  # type: ignore[arg-type]

        try:
            loop.call_soon_threadsafe(deliver)
        except RuntimeError:  # the loop is gone: the daemon stopped meanwhile
            if result[0] is not None and self.engine._own_probes:
                result[0].probes.close()

    async def _load_then_run(self) -> None:
        loop = asyncio.get_running_loop()
        assert self.engine is not None
        t0 = loop.time()
        fut: asyncio.Future[Loaded] = loop.create_future()
        threading.Thread(target=self._prepare_in_thread, args=(loop, fut), name="pressure-load", daemon=True).start()
        try:
            loaded = await fut
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.state = "failed"
            log.error("pressure load failed", error=repr(e))
            return
        self.engine.install(loaded)  # on the loop: the readers become the engine's here
        gc.freeze()  # the BPF tables live as long as the process: out of the collector's walks
        self.load_seconds = loop.time() - t0
        self.state = "running"
        log.info("pressure ready", load_seconds=round(self.load_seconds, 3))
        await self._run()

    # -- the cycle ----------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        eng = self.engine
        assert eng is not None
        while True:
            try:
                containers = eng.read_containers()  # the CPU policy's state, read on its loop
                res = await loop.run_in_executor(None, eng.observe, containers)
                await self._apply(res)
                self._failed = False
            except Exception:
                self._failed = True
                log.exception("pressure tick failed")
            await asyncio.sleep(eng.cfg.interval_s)

    async def _apply(self, res: TickResult) -> None:
        eng = self.engine
        assert eng is not None
        eng.apply_health(res)
        for ev in res.evictions:
            await self._evict(ev)

    async def _evict(self, ev: Eviction) -> None:
        eng = self.engine
        assert eng is not None
        loop = asyncio.get_running_loop()
        act = eng.evictor()
        try:
            outcome = await loop.run_in_executor(None, act.execute, ev, eng.eviction_paths(ev))
        except Exception as e:
            outcome = {"error": repr(e)}
        eng.record_eviction(ev, act.name, outcome)

    # -- control ------------------------------------------------------------------
    #: what reconfigure() takes while running; the daemon's reload logs the rest as needing a restart
    live_settings = LIVE_SETTINGS

    def reconfigure(self, cfg: PressureConfig) -> None:
        """A reloaded [pressure] section whose changes are all in ``live_settings``."""
        if self.engine is not None:
            self.engine.reconfigure(cfg)

    async def stop(self) -> None:
        self._abandon.set()
        await cancel_and_wait(self._task)
        if self._collector is not None:
            REGISTRY.unregister(self._collector)
            self._collector = None
        if self.engine is not None and self.engine.loaded:
            await asyncio.get_running_loop().run_in_executor(None, self.engine.close)

    def healthy(self) -> bool:
        if self.state == "loading":
            return True  # working as designed; readiness says it is not there yet
        return self.state == "running" and self._task is not None and not self._task.done() and not self._failed

    def ready(self) -> bool:
        return self.state == "running"

    def readiness(self) -> str:
        """One line for /healthz."""
        if self.state == "loading":
            return "loading probes"
        if self.state == "failed":
            return "probes failed to load"
        eng = self.engine
        if eng is None:
            return self.state
        modes = [m for m, _ in eng.status().values()]
        return f"probes: {modes.count('bpf')} in BPF, {modes.count('fallback')} fallback"


def factory(ctx: DaemonContext) -> PressureComponent | None:
    return PressureComponent() if ctx.config[PRESSURE_SECTION].enabled else None

