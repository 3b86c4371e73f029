"""The advisor as a daemon component: read, decide (in a worker thread), apply (on the loop).

Every ``interval_s`` (at most 1 s): on the loop, read the CPU policy's containers and
pools and the pressure engine's last run-queue counters per container (``PRESSURE``:
the eBPF probe, or its schedstat fallback); in a worker thread, read the containers' CPU
usage from their cgroups, build the interval's sample and run the pure controller
(``agent.advisor.controller``); back on the loop, apply its decision: the shared pool's
size through the CPU policy's own API (``CPU_SHARED_POOL``: journaled, the policy's
invariants kept), the reclaimed pods' quota through ``agent.advisor.suppress`` (a worker
thread: cgroupfs writes), and the eviction gate the pressure engine asks
(``EVICTION_GATE``, published here): suppress before evict. Each change, and a hold now
and then, goes to ``<root>/advisor/decisions.jsonl``; the controller's outputs and the
quotas it replaced go to ``<root>/advisor/state.json`` so a restart carries on where the
last run stopped (the quotas are lifted on a clean stop and written again at start).

Shared state (the controller state, the last decision) lives on the loop only; the
worker threads get copies and hand back new values.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.advisor import metrics as m
from agent.advisor.config import ADVISOR_SECTION, LIVE_SETTINGS, AdvisorConfig
from agent.advisor.controller import ControllerState, Decision, Limits, Sample, decide
from agent.advisor.inputs import Counters, interval, quantile_us
from agent.advisor.memcontrol import MemDecision, MemPod, MemSample, MemState, decide_memory
from agent.advisor.memhigh import MemoryHigh, memory_high_supported
from agent.advisor.placement import Machine, Placement, numa_pressure, place
from agent.advisor.record import DecisionLog, read_state, write_state
from agent.advisor.suppress import Suppressor, plan_quotas, pod_cgroups
from agent.cgroups.config import CGROUPS_SECTION
from agent.cgroups.detect import CgroupError, detect
from agent.cgroups.fs import CgroupFS, CgroupVanished
from agent.contracts import CPU_POLICY, CPU_SHARED_POOL, EVICTION_GATE, PRESSURE, DaemonContext
from agent.contracts import CPUAllocations, PressureSignals, SharedPoolSizer
from agent.contracts.cpu import AllocationInfo
from agent.contracts.hist import Histogram
from agent.contracts.pressure import normalize_qos
from agent.cpuset import CPUSet
from agent.daemonconfig import DAEMON_SECTION
from agent.eventlog import get_logger
from agent.pressure.procfs import read_psi
from agent.tasks import cancel_and_wait

log = get_logger("hwagent.advisor")

__all__ = ["AdvisorComponent", "factory", "Reading"]

SHARED_POOL = "share"
#: no size handed to the policy yet: the first decision always is (it switches the policy to advised pools)
_UNSET = object()


@dataclasses.dataclass(frozen=True)
class Reading:
    """What the loop hands the worker for one interval (copies, nothing shared)."""

    at: float
    shared: tuple[tuple[tuple[str, str], str, str], ...]  # (key, cgroup path, ns/name)
    reclaimed: tuple[tuple[tuple[str, str], str, str], ...]
    runqueue: dict[tuple[str, str], Histogram]
    limits: Limits
    #: the shared pool's CPUs now, and the CPUs it may hold (for the NUMA placement)
    pool: CPUSet = CPUSet()
    room: CPUSet = CPUSet()


def _who(a: AllocationInfo) -> str:
    return f"{a.pod_namespace}/{a.pod_name}" if a.pod_namespace or a.pod_name else a.pod_uid


class AdvisorComponent:
    name = "advisor"
    live_settings = LIVE_SETTINGS

    def __init__(self, cfg: AdvisorConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.tuning = cfg.tuning()
        self.clock = clock
        self.state = ControllerState()
        self.last: Decision | None = None
        self.counters = Counters()
        self._allow_until = -math.inf
        self._task: asyncio.Task[None] | None = None
        self._failed = False
        self._last_hold_record = -math.inf
        self._ctx: DaemonContext | None = None
        self.cpu: CPUAllocations | None = None
        self.sizer: SharedPoolSizer | None = None
        self.pressure: PressureSignals | None = None
        self.fs: CgroupFS | None = None
        self.suppressor: Suppressor | None = None
        self.log: DecisionLog | None = None
        self.root: Path | None = None
        self.procfs_root = "/proc"
        self._psi_last: tuple[float, int] | None = None
        # -- memory.high of reclaimed pods ([advisor] memory_high; agent.advisor.memcontrol)
        self.mem_state = MemState()
        self.last_memory: MemDecision | None = None
        #: the writer; None without a v2 memory controller (then memory_inert says why)
        self.memwriter: MemoryHigh | None = None
        self.memory_inert: str | None = None
        self._mem_psi_last: tuple[float, int, int] | None = None
        #: the shared pool size last handed to the policy (None: the policy's own; _UNSET: none yet)
        self.applied_size: object = _UNSET
        #: the machine the pool is placed on (the daemon's topology), and the last placement applied
        self.machine: Machine | None = None
        self.placement: Placement | None = None

    # -- the gate the pressure engine asks (EvictionGate) ------------------------------------
    def allows_eviction(self, qos: str) -> bool:
        """Reclaimed pods only (the shared pods are what the advisor protects: it grows their
        pool instead), and only for two intervals after a decision that allowed eviction (the
        engine ticks on its own clock); a plain float read, safe from the engine's worker thread."""
        if qos == "reclaimed" and self.clock() < self._allow_until:
            m.EVICTIONS_ALLOWED.inc()
            return True
        return False

    def summary(self) -> str:
        """One line for `hwagent status`."""
        d = self.last
        if d is None:
            return f"target p99 {self.tuning.target_us:g}us; no decision yet"
        q = "not suppressed" if d.quota_cpus is None else f"reclaimed held to {d.quota_cpus:g} cpus"
        p99 = d.sample.shared_p99_us
        return (f"shared pool {d.shared_size} cpus (min {d.limits.shared_min}, max {d.limits.shared_max}), {q}, "
                f"headroom {self.headroom():g} cpus; p99 {'-' if p99 is None else f'{p99:.0f}us'} "
                f"(target {d.target_us:.0f}us); last: {d.action}{self._memory_summary()}")

    def _memory_summary(self) -> str:
        if not self.cfg.memory_high:
            return ""
        if self.memwriter is None:
            return f"; memory_high inert: {self.memory_inert}"
        n = len(self.mem_state.highs)
        return f"; memory.high lowered on {n} reclaimed pod{'s' if n != 1 else ''}" if n else \
            "; memory.high not lowered"

    def headroom(self) -> float:
        """CPUs reclaimed pods may use now: the reclaim pool, under the quota when suppressed."""
        d = self.last
        if d is None:
            return 0.0
        room = float(d.limits.reclaim_cpus)
        return round(room if d.quota_cpus is None else min(room, d.quota_cpus), 3)

    # -- life cycle ------------------------------------------------------------------------
    async def start(self, ctx: DaemonContext) -> None:
        self._ctx = ctx
        self.cpu = ctx.lookup(CPU_POLICY)
        self.sizer = ctx.lookup(CPU_SHARED_POOL)
        self.pressure = ctx.lookup(PRESSURE)
        if self.cpu is None or self.sizer is None:
            raise RuntimeError("[advisor] needs the CPU policy ([cpu] enabled = true): it sizes the policy's pools")
        if self.pressure is None:
            log.warning("advisor without pressure probes", note="[pressure] is off: the shared pool is sized "
                        "from CPU usage alone, no run-queue delay is measured")
        self.procfs_root = ctx.config[DAEMON_SECTION].procfs_root
        self.machine = Machine.of(ctx.topology)
        try:
            self.fs = CgroupFS(detect(ctx.config[CGROUPS_SECTION].root))
        except CgroupError as e:
            log.warning("advisor cannot suppress", reason=str(e), note="no cgroup access: sizing only")
            self.memory_inert = f"no cgroup access ({e})"
        if self.fs is not None:
            self.memory_inert = memory_high_supported(self.fs.layout)
        if self.cfg.memory_high and self.memory_inert is not None:
            log.warning("advisor memory high inert", reason=self.memory_inert)
        self.root = ctx.root_dir
        ctx.path("advisor").mkdir(mode=0o700, parents=True, exist_ok=True)  # root's (agent.daemon.rootmodes)
        loop = asyncio.get_running_loop()
        self.log = await loop.run_in_executor(None, DecisionLog, ctx.root_dir, self.cfg.decisions_keep)
        saved = read_state(ctx.root_dir) or {}
        self.state = ControllerState.from_json(saved.get("controller") or {})
        originals = {k: tuple(v) for k, v in (saved.get("quota_originals") or {}).items()
                     if isinstance(v, list) and len(v) == 2}
        if self.fs is not None:
            self.suppressor = Suppressor(self.fs, originals)
        if self.fs is not None and self.memory_inert is None:
            # made even with memory_high off: a previous run's highs (saved originals) are put back
            mem_orig = {str(k): (v if isinstance(v, int) else None)
                        for k, v in (saved.get("memory_originals") or {}).items()}
            self.memwriter = MemoryHigh(self.fs, mem_orig)
            self.mem_state = MemState.from_json(saved.get("memory") or {})
        if self.state.shared_size is not None or self.state.quota_cpus is not None:
            log.info("advisor state restored", shared_size=self.state.shared_size, quota_cpus=self.state.quota_cpus)
        ctx.publish(EVICTION_GATE, self)
        m.TARGET_SECONDS.set(self.tuning.target_us / 1e6)
        self._task = loop.create_task(self._run(), name="advisor")
        log.info("advisor started", target_us=self.tuning.target_us, interval_s=self.cfg.interval_s)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        if self._ctx is not None:
            self._ctx.withdraw(EVICTION_GATE)
        if self.suppressor is not None:  # nobody watches once we are gone: lift what we held
            with contextlib.suppress(Exception):
                await asyncio.get_running_loop().run_in_executor(None, self.suppressor.release)
        if self.memwriter is not None:  # the same for memory.high: each cgroup's own value back
            with contextlib.suppress(Exception):
                await asyncio.get_running_loop().run_in_executor(None, self.memwriter.release)
        if self.suppressor is not None or self.memwriter is not None:
            with contextlib.suppress(Exception):
                await asyncio.get_running_loop().run_in_executor(None, self._save)

    def reconfigure(self, cfg: AdvisorConfig) -> None:
        """SIGHUP: a new target or tuning, taken from the next decision on."""
        self.cfg = cfg
        self.tuning = cfg.tuning()
        m.TARGET_SECONDS.set(self.tuning.target_us / 1e6)
        log.info("advisor reconfigured", target_us=self.tuning.target_us, memory_high=cfg.memory_high)
        if cfg.memory_high and self.memory_inert is not None:
            log.warning("advisor memory high inert", reason=self.memory_inert)

    def healthy(self) -> bool:
        return self._task is not None and not self._task.done() and not self._failed

    def readiness(self) -> str:
        return self.summary()

    # -- the cycle -------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t0 = loop.time()
            try:
                await self.tick()
                self._failed = False
            except asyncio.CancelledError:
                raise
            except Exception:
                self._failed = True
                log.exception("advisor tick failed")
            await asyncio.sleep(max(0.0, self.cfg.interval_s - (loop.time() - t0)))

    def read(self) -> Reading:
        """On the loop: the policy's containers and bounds, the pressure engine's counters.

        A container's cgroup is the policy's record of it (standalone: the launcher binds it)
        or else the pressure engine's (kubelet mode: the kubelet starts the containers and
        nothing binds them; the engine knows their cgroups from the kubepods tree). Before,
        kubelet mode skipped every container, so the advisor saw no shared pod to grow the
        pool for and no reclaimed pod to hold back."""
        assert self.cpu is not None and self.sizer is not None
        shared, reclaimed = [], []
        shared_cpus = CPUSet()
        requested = 0.0
        known = {c.key: c.cgroup_path for c in self.pressure.containers if c.cgroup_path} \
            if self.pressure is not None else {}
        for a in self.cpu.allocations():
            key = (a.pod_uid, a.container_name)
            path = a.cgroup_path or known.get(key)
            if not path:
                continue
            q = normalize_qos(a.qos_level)
            if q == "shared" and a.owner_pool_name in (SHARED_POOL, ""):
                shared.append((key, path, _who(a)))
                requested += a.request_quantity
                shared_cpus = shared_cpus | a.cpuset
            elif q == "reclaimed":
                reclaimed.append((key, path, _who(a)))
        lo, hi = self.sizer.shared_bounds()
        pools = self.cpu.pools()
        reclaim = pools.get("reclaim") or CPUSet()
        rq = self.pressure.container_runqueue() if self.pressure is not None else {}
        return Reading(self.clock(), tuple(shared), tuple(reclaimed), rq,
                       Limits(lo, hi, len(reclaim), overlap=bool(shared_cpus & reclaim), shared_requests=requested),
                       pool=pools.get(SHARED_POOL) or CPUSet(), room=self.sizer.shared_room())

    def choose(self, r: Reading, d: Decision) -> Placement | None:
        """In a worker thread: which CPUs the pool of ``d.shared_size`` CPUs should be
        (agent.advisor.placement), from each shared pod's run-queue wait this interval on
        the nodes of its ``cpuset.mems``; None when there is no pool to place yet."""
        if self.machine is None or not r.pool or d.shared_size < 1:
            return None
        waits: list[tuple[float, CPUSet | None]] = []
        for _, path, who in r.shared:
            mems: CPUSet | None = None
            if self.fs is not None:
                with contextlib.suppress(CgroupVanished, OSError, ValueError):
                    mems = self.fs.read_mems(path)
            waits.append((d.sample.pods.get(who, 0.0), mems))
        return place(self.machine, r.pool, r.room, d.shared_size, numa_pressure(self.machine, waits))

    def compute(self, r: Reading, state: ControllerState, prev: Counters) -> tuple[Decision, Counters]:
        """In a worker thread: cgroup usage reads, the interval's sample, the decision."""
        usage: dict[tuple[str, str], int] = {}
        if self.fs is not None:
            for key, path, _ in r.shared + r.reclaimed:
                with contextlib.suppress(CgroupVanished, OSError):
                    usage[key] = self.fs.read_cpu_usage_ns(path)
        want = {k for k, _, _ in r.shared + r.reclaimed}
        rq_now = {k: h for k, h in r.runqueue.items() if k in want}
        rq, used, dt, counters = interval(prev, r.at, rq_now, usage)
        shared_keys = [k for k, _, _ in r.shared]
        h = Histogram()
        for k in shared_keys:
            if k in rq:
                h = h + rq[k]
        # the p99 over the last signal_window intervals: one second of a pod waking 200 times
        # is two wake-ups past its p99, and its per-second p99 spanned 2 us to 8 ms under the
        # same load (issue 26, round 2); a few seconds of wake-ups give a p99 worth acting on
        counters.window = (*prev.window, h)[-max(1, self.cfg.signal_window):]
        h = sum(counters.window, Histogram())
        pods: dict[str, float] = {}
        for k, _, who in r.shared + r.reclaimed:
            if k in rq and dt > 0:
                pods[who] = pods.get(who, 0.0) + rq[k].sum_ns / 1e9 / dt
        sample = Sample(
            at=r.at,
            shared_p99_us=quantile_us(h, 0.99),
            shared_usage=sum(used.get(k, 0.0) for k in shared_keys),
            reclaim_usage=sum(used.get(k, 0.0) for k, _, _ in r.reclaimed),
            reclaimed=len({k[0] for k, _, _ in r.reclaimed}),
            psi_some=self._psi(r.at),
            pods=pods,
        )
        return decide(state, sample, r.limits, self.tuning), counters

    def _psi(self, now: float) -> float | None:
        psi = read_psi(Path(self.procfs_root) / "pressure" / "cpu")
        if psi is None:
            return None
        last, self._psi_last = self._psi_last, (now, psi.some_total_us)
        if last is None or now <= last[0]:
            return None
        return max(0.0, (psi.some_total_us - last[1]) / 1e6 / (now - last[0]))

    async def tick(self) -> Decision:
        loop = asyncio.get_running_loop()
        r = self.read()
        first = self.counters.at is None
        d, counters = await loop.run_in_executor(None, self.compute, r, self.state, self.counters)
        self.counters = counters
        if first:  # no interval yet: counters only, nothing decided on an empty sample
            d = dataclasses.replace(d, action="hold", reason="first reading", evict=False,
                                    state=dataclasses.replace(self.state, over=0, calm=0))
        md: MemDecision | None = None
        if self.memwriter is not None and self.cfg.memory_high:
            md = await loop.run_in_executor(None, self.compute_memory, r, self.mem_state)
        elif self.mem_state != MemState():
            self.mem_state = MemState()  # switched off (SIGHUP): apply() lifts what was lowered
        await self.apply(d, r, md)
        return d

    def compute_memory(self, r: Reading, state: MemState) -> MemDecision:
        """In a worker thread: the node's memory PSI over the interval and the reclaimed pods'
        memory.current, then the pure memory decision (agent.advisor.memcontrol)."""
        assert self.fs is not None
        pods: dict[str, MemPod] = {}
        for pod in pod_cgroups(p for _, p, _ in r.reclaimed):
            with contextlib.suppress(CgroupVanished, OSError, ValueError):
                pods[pod] = MemPod(current=self.fs.read_memory_current(pod))
        some = full = avg10 = None
        psi = read_psi(Path(self.procfs_root) / "pressure" / "memory")
        if psi is not None:
            avg10 = psi.some_avg10
            last, self._mem_psi_last = self._mem_psi_last, (r.at, psi.some_total_us, psi.full_total_us)
            if last is not None and r.at > last[0]:
                some = max(0.0, (psi.some_total_us - last[1]) / 1e6 / (r.at - last[0]))
                full = max(0.0, (psi.full_total_us - last[2]) / 1e6 / (r.at - last[0]))
        s = MemSample(at=r.at, some=some, full=full, some_avg10=avg10, pods=pods)
        return decide_memory(state, s, self.cfg.memory_tuning())

    async def apply(self, d: Decision, r: Reading, md: MemDecision | None = None) -> None:
        """On the loop: the policy's pool, the quotas, memory.high, the gate, the record."""
        assert self.sizer is not None
        loop = asyncio.get_running_loop()
        changed = d.action != "hold"
        size = d.state.shared_size
        placed: Placement | None = None
        if size != self.applied_size:
            try:
                placed = await loop.run_in_executor(None, self.choose, r, d)
                await self.sizer.resize_shared(size, placed.cpus if placed is not None else None)
                self.applied_size = size
                self.placement = placed
            except Exception as e:  # a refused re-size changes nothing: keep the old size, say why
                placed = None
                log.warning("shared pool resize refused", size=size, error=str(e))
                d = dataclasses.replace(d, action="hold", reason=f"resize to {size} refused: {e}",
                                        state=dataclasses.replace(d.state, shared_size=self.state.shared_size))
        self.state = d.state
        self.last = d
        if d.evict:
            self._allow_until = self.clock() + 2 * max(self.cfg.interval_s, 1.0)
        if self.suppressor is not None:
            plan = plan_quotas(pod_cgroups(p for _, p, _ in r.reclaimed), d.quota_cpus)
            if plan != self.suppressor.applied or set(self.suppressor.originals) - set(plan):
                await loop.run_in_executor(None, self.suppressor.apply, plan)
                changed = True
        if md is not None:
            self.mem_state, self.last_memory = md.state, md
            changed = changed or md.action != "hold"
        if self.memwriter is not None:
            highs = self.mem_state.highs
            if highs != self.memwriter.applied or set(self.memwriter.originals) - set(highs):
                await loop.run_in_executor(None, self.memwriter.apply, dict(highs))
                changed = True
        self._metrics(d, md)
        now = self.clock()
        if changed or now - self._last_hold_record >= self.cfg.hold_record_s:
            self._last_hold_record = now
            rec = d.record()
            rec["wall_time"] = round(time.time(), 3)
            rec["reclaimed_pods"] = sorted({who for _, _, who in r.reclaimed})
            rec["shared_pods"] = sorted({who for _, _, who in r.shared})
            if md is not None:
                who = {pod: w for pod, w in ((pod_cgroups([p])[0], w) for _, p, w in r.reclaimed)}
                rec["memory"] = {**md.record(), "who": dict(sorted(who.items()))}
            if placed is not None and self.machine is not None:
                rec["placement"] = placed.record(self.machine)
            await loop.run_in_executor(None, self._write, rec, changed)
        if d.action != "hold":
            log.info("advisor decision", action=d.action, reason=d.reason)
        if md is not None and md.action != "hold":
            log.info("advisor memory decision", action=md.action, reason=md.reason)

    def _write(self, rec: dict[str, Any], save: bool) -> None:
        assert self.log is not None
        try:
            self.log.append(rec)
            if save:
                self._save()
        except OSError as e:
            log.error("advisor record write failed", error=e.strerror)

    def _save(self) -> None:
        if self.root is None:
            return
        doc = {"controller": self.state.to_json(), "target_us": self.tuning.target_us,
               "quota_originals": {k: list(v) for k, v in (self.suppressor.originals.items()
                                                          if self.suppressor else ())},
               "memory": self.mem_state.to_json(),
               "memory_originals": dict(self.memwriter.originals) if self.memwriter else {},
               "last": self.last.record() if self.last is not None else None, "headroom_cpus": self.headroom(),
               "wall_time": round(time.time(), 3)}
        write_state(self.root, doc)

    def _metrics(self, d: Decision, md: MemDecision | None = None) -> None:
        if md is not None:
            m.MEMORY_DECISIONS.labels(md.action).inc()
            some = md.sample.some
            m.MEMORY_PSI_SOME.set(-1 if some is None else some)
        m.MEMORY_HIGH_PODS.set(len(self.mem_state.highs))
        m.MEMORY_HIGH_BYTES.set(sum(self.mem_state.highs.values()))
        m.DECISIONS.labels(d.action).inc()
        m.SHARED_CPUS.set(d.shared_size)
        m.SHARED_BOUNDS.labels("min").set(d.limits.shared_min)
        m.SHARED_BOUNDS.labels("max").set(d.limits.shared_max)
        m.QUOTA_CPUS.set(-1 if d.quota_cpus is None else d.quota_cpus)
        m.HEADROOM_CPUS.set(self.headroom())
        p99 = d.sample.shared_p99_us
        m.P99_SECONDS.set(-1 if p99 is None else p99 / 1e6)


def factory(ctx: DaemonContext) -> AdvisorComponent | None:
    cfg = ctx.config[ADVISOR_SECTION]
    return AdvisorComponent(cfg) if cfg.enabled else None
