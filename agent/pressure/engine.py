"""One reading -> decision -> action cycle, synchronous, for the component and the CLI.

Picks per concern the BPF reader or its fallback (reported as such), reads
everything once per tick, and feeds the pure health tracker and pressure
evaluator. No asyncio here: the component runs ``tick`` in an executor and
the ``hwagent probes`` view calls it directly.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.cgroups.paths import DEFAULT_WORKLOAD_ROOTS
from agent.contracts import CPUAllocations, Deferred, DeviceHealth, EvictionGate, Evictor, PodDirectorySource
from agent.eventlog import get_logger
from agent.pressure.actions import EvictionRecord, ReportEviction
from agent.cgroups.hierarchy import CgroupIndex, Hierarchy, detect_hierarchy, relative_cgroup_path
from agent.cgroups.mounts import cgroup_mounts
from agent.pressure.config import PressureConfig
from agent.contracts.pressure import Eviction
from agent.pressure.eviction import EvictionPolicy, PressureEvaluator, container_from_record
from agent.contracts.pressure import Container
from agent.pressure.health import HealthChange, HealthDriver, HealthPolicy, HealthTracker
from agent.contracts.hist import Histogram
from agent.pressure.probes import PROBES, ProbeSet
from agent.pressure.procfs import read_psi
from agent.pressure.readers import (
    BlockReading,
    BpfBlock,
    BpfExtras,
    BpfNet,
    BpfRunqueue,
    DiskstatsBlock,
    Extras,
    NetCounters,
    SchedstatRunqueue,
    SysfsNet,
    rollup,
)

log = get_logger("hwagent.pressure")

__all__ = ["PressureEngine", "TickResult", "Loaded", "FALLBACKS", "LIVE_SETTINGS"]

#: what runs instead of each probe when it is off or unavailable
FALLBACKS = {
    "runqlat": "schedstat (/proc/<tid>/schedstat run_delay and pcount of watched cgroups; a histogram of each "
               "thread's mean wait per timeslice per read, coarser than the probe's)",
    "blockio": "diskstats (/proc/diskstats average latency; no error counts, so no block device health)",
    "netdev": "sysfs (/sys/class/net/*/statistics/tx_errors and queues/tx-*/tx_timeout)",
    "iommu": "none (IOMMU faults only in the kernel log)",
    "thermal": "none (read /sys/class/thermal for temperatures)",
    "irq": "none (/proc/interrupts)",
}


#: [pressure] settings a running engine takes on a config reload (SIGHUP); the rest
#: (which probes, map sizes, the hierarchy) are compiled in and need a restart
LIVE_SETTINGS = frozenset({
    "interval_s", "soft_threshold", "hard_threshold", "window_s", "met_fraction", "cooldown_s", "psi_confirm",
    "error_threshold", "error_window_s", "recovery_s", "irq_storm_per_s", "eviction_enabled", "health_enabled",
    "top_cgroups", "eviction_hook",
})


@dataclass
class Loaded:
    """What ``prepare`` found and built, handed to ``install``."""

    mounts: dict[str, Path]
    hierarchy: Hierarchy | None
    probes: ProbeSet
    index: CgroupIndex | None
    runqueue: Any
    block: Any
    net: Any
    extras: BpfExtras
    #: first readings of a probe set someone else loaded (its counters hold history)
    baseline: tuple[BlockReading, dict[str, NetCounters], Extras] | None = None


@dataclass
class TickResult:
    at: float
    evictions: list[Eviction] = field(default_factory=list)
    health_changes: list[HealthChange] = field(default_factory=list)


class PressureEngine:
    """The ``PressureSignals`` the pressure component publishes.

    What it reads and acts on is handed in (the component looks each up at its
    start): the CPU policy's allocations (which containers to watch), the
    device-health board, in kubelet mode the pod directory, and who acts on an
    eviction (``evictor``: asked at each eviction, since the runtime and the
    eviction plugin start after pressure). None for a part that does not run.
    """

    def __init__(
        self,
        cfg: PressureConfig,
        *,
        cpu: CPUAllocations | None = None,
        device_health: DeviceHealth | None = None,
        pod_directory: PodDirectorySource | None = None,
        mode: str = "standalone",
        record_path: Path | None = None,
        procfs_root: str = "/proc",
        sysfs_root: str = "/sys",
        probes: ProbeSet | None = None,
        clock: Callable[[], float] = time.monotonic,
        evictor: Deferred[Evictor] = lambda: None,
        gate: Deferred[EvictionGate] = lambda: None,
        cgroup_roots: Sequence[str] = DEFAULT_WORKLOAD_ROOTS,
        cgroup_hierarchy: str = "auto",
    ) -> None:
        self.cfg = cfg
        self.cpu = cpu
        self.device_health = device_health
        self.pod_directory = pod_directory
        self.mode = mode
        self.procfs_root = procfs_root
        self.sysfs_root = sysfs_root
        self.clock = clock
        self.probes = probes
        self._own_probes = probes is None
        #: set once install() ran: readers picked, probes attached or fallen back
        self.loaded = False
        #: the subtrees an eviction may kill in (agent.cgroups.kill refuses the rest)
        self.cgroup_roots = tuple(cgroup_roots)
        #: cgroups.hierarchy: the hierarchy the run-queue probe keys cgroups on
        self.cgroup_hierarchy = cgroup_hierarchy
        self.hierarchy: Hierarchy | None = None
        self.index: CgroupIndex | None = None
        self.mounts: dict[str, Path] = {}
        self.runqueue: Any = None
        self.block: Any = None
        self.net: Any = None
        self.extras: BpfExtras | None = None
        self.health = HealthDriver(
            HealthTracker(HealthPolicy(cfg.error_threshold, cfg.error_window_s, cfg.recovery_s)),
            device_health,
        )
        self.evaluator = PressureEvaluator(
            EvictionPolicy(
                cfg.soft_threshold, cfg.hard_threshold, cfg.window_s, cfg.interval_s,
                cfg.met_fraction, cfg.cooldown_s, cfg.psi_confirm,
            )
        )
        self._evictor = evictor
        #: the advisor, when it runs: an eviction goes ahead only when it allows (suppress before evict)
        self._gate = gate
        #: evictions the gate held back (the evaluator keeps its samples and tries again next tick)
        self.evictions_held = 0
        #: what pressure does when nobody acts on an eviction: report it (record, hook)
        self.report = ReportEviction(cfg.eviction_hook)
        self.record = EvictionRecord(record_path)
        # last readings, for metrics and the live view
        self.last_runqueue: dict[str, Histogram] = {}
        self.last_block = BlockReading()
        self.last_net: dict[str, NetCounters] = {}
        self.last_extras = Extras()
        self.irq_rates: dict[int, float] = {}
        self._last_irq: tuple[float, dict[int, tuple[int, int]]] | None = None
        self.containers: list[Container] = []
        self.evictions_total: dict[tuple[str, str], int] = {}
        self._base: dict[tuple[str, str], dict[str, tuple[int, str]]] = {}

    # -- set-up ------------------------------------------------------------------
    def load(self) -> None:
        """Compile/attach and pick the readers, all at once (the CLI and tests)."""
        self.install(self.prepare())

    def prepare(self) -> Loaded:
        """The slow half of set-up (the BPF compile, a cgroup walk): touches nothing of
        the engine's, so the daemon runs it in a worker thread and installs the result
        on its loop."""
        mounts = cgroup_mounts(self.procfs_root)
        try:
            hierarchy: Hierarchy | None = detect_hierarchy(self.cgroup_hierarchy, self.procfs_root)
        except ValueError as e:
            log.warning("cgroup hierarchy unavailable", error=e)
            hierarchy = None
        p = self.probes
        if p is None:
            p = ProbeSet(
                self.cfg.enabled_probes(),
                hierarchy=hierarchy.name if hierarchy else "v2",
                probes_dir=Path(self.cfg.probes_dir) if self.cfg.probes_dir else None,
                btf_path=self.cfg.btf_path,
                max_cgroups=self.cfg.max_cgroups,
            )
            if hierarchy is None and "runqlat" in p.wanted:
                p.wanted.remove("runqlat")
            p.load()
        index = None
        if hierarchy is not None:
            index = CgroupIndex(hierarchy.mount)
            index.refresh()
        runqueue: Any = None
        if p.active("runqlat") and index is not None:
            runqueue = BpfRunqueue(p, index)
        elif hierarchy is not None:
            runqueue = SchedstatRunqueue(hierarchy.mount, self.procfs_root)
        block = BpfBlock(p) if p.active("blockio") else DiskstatsBlock(self.procfs_root)
        net = BpfNet(p) if p.active("netdev") else SysfsNet(self.sysfs_root)
        loaded = Loaded(mounts, hierarchy, p, index, runqueue, block, net, BpfExtras(p))
        if not self._own_probes:
            # a probe set loaded by someone else holds history: count from here on
            loaded.baseline = (block.read(), net.read(), loaded.extras.read())
        return loaded

    def install(self, loaded: Loaded) -> None:
        """The quick half: make the prepared readers the engine's (on the owner's thread)."""
        self.mounts, self.hierarchy, self.probes = loaded.mounts, loaded.hierarchy, loaded.probes
        self.index, self.runqueue, self.block, self.net = loaded.index, loaded.runqueue, loaded.block, loaded.net
        self.extras = loaded.extras
        if loaded.baseline is not None:
            self.last_block, self.last_net, self.last_extras = loaded.baseline
            self._base = self._health_readings()[0]
        self.loaded = True
        for name, st in self.status().items():
            log.info("probe", name=name, mode=st[0], detail=st[1])

    def recent_evictions(self) -> list[dict[str, Any]]:
        """The last evictions (reason, evidence, outcome), oldest first: copies, so a
        reader never holds the engine's record."""
        return [dict(r) for r in self.record.recent]

    def pool_pressure(self) -> dict[str, float]:
        """pool -> its pressure ratio at the last evaluation (NaN left out)."""
        return {name: st.pressure for name, st in self.evaluator.status.items() if st.pressure == st.pressure}

    def status(self) -> dict[str, tuple[str, str]]:
        """probe -> (mode, detail): mode "bpf", "fallback", or "loading" before install()."""
        out = {}
        if not self.loaded:
            return {name: ("loading", "probes are being compiled and attached") for name in PROBES}
        for name in PROBES:
            st = self.probes.states[name] if self.probes else None
            if st is not None and st.state == "bpf":
                out[name] = ("bpf", ", ".join(st.attached))
            else:
                why = st.detail if st else "not loaded"
                out[name] = ("fallback", f"{FALLBACKS[name]}; probe: {why}")
        return out

    def close(self) -> None:
        if self._own_probes and self.probes is not None:
            self.probes.close()
            self.probes = None

    # -- one cycle ---------------------------------------------------------------
    def read_containers(self) -> list[Container]:
        """The CPU policy's containers now (on the policy owner's thread: the daemon's loop)."""
        policy = self.cpu
        out = []
        for r in policy.allocations() if policy is not None else ():
            try:
                out.append(container_from_record(r))
            except Exception as e:  # one malformed record must not stop the rest
                log.warning("allocation record skipped", error=repr(e))
        pods = self.pod_directory  # kubelet mode: every container the kubepods tree holds
        if pods is not None:
            have = {c.cgroup_path for c in out if c.cgroup_path}
            by_key = {c.key: i for i, c in enumerate(out)}
            for c in pods.containers_for_pressure():
                i = by_key.get(c.key)
                if i is not None and not out[i].cgroup_path:  # the policy's record, now with its cgroup
                    out[i] = dataclasses.replace(out[i], cgroup_path=c.cgroup_path)
                elif c.cgroup_path not in have and i is None:
                    out.append(c)
        return out

    def _allow_eviction(self, qos: str) -> bool:
        """Asked by the evaluator with its victim's QoS level: without an advisor, always."""
        gate = self._gate()
        if gate is None or gate.allows_eviction(qos):
            return True
        self.evictions_held += 1
        return False

    def container_runqueue(self) -> dict[tuple[str, str], Histogram]:
        """Per watched container: its cgroup's run-queue delay counters as last read."""
        by_cgroup = self.last_runqueue
        return {c.key: rollup(by_cgroup, relative_cgroup_path(c.cgroup_path, self.mounts))
                for c in self.containers if c.cgroup_path}

    def container_wait_ns(self, by_cgroup: dict[str, Histogram]) -> dict[tuple[str, str], int]:
        out = {}
        for c in self.containers:
            if c.cgroup_path:
                out[c.key] = rollup(by_cgroup, relative_cgroup_path(c.cgroup_path, self.mounts)).sum_ns
        return out

    def tick(self) -> TickResult:
        """One whole cycle on the caller's thread (the CLI and tests; the daemon's
        component runs ``observe`` off its loop and applies the result on it)."""
        res = self.observe(self.read_containers())
        self.apply_health(res)
        for ev in res.evictions:
            self._evict(ev)
        return res

    def observe(self, containers: list[Container]) -> TickResult:
        """Readings and decisions: changes only the engine's own readings and trackers,
        never another component's state, so it may run in a worker thread. What to do
        about the result (push health, evict) is ``apply_health`` and the eviction action."""
        now = self.clock()
        res = TickResult(now)
        self.containers = containers
        watch = [relative_cgroup_path(c.cgroup_path, self.mounts) for c in self.containers if c.cgroup_path]
        if self.runqueue is not None:
            self.last_runqueue = self.runqueue.read(watch)
        self.last_block = self.block.read()
        self.last_net = self.net.read()
        if self.extras is not None:
            self.last_extras = self.extras.read()
            self._irq_rates(now)
        if self.cfg.eviction_enabled and self.containers:
            psi = read_psi(Path(self.procfs_root) / "pressure" / "cpu")
            res.evictions = self.evaluator.evaluate(
                now, self.containers, self.container_wait_ns(self.last_runqueue), psi.some_total_us if psi else None,
                allow=self._allow_eviction,
            )
        if self.cfg.health_enabled:
            res.health_changes = self.health.decide(now, *self._health_readings())
        return res

    def apply_health(self, res: TickResult) -> None:
        """Push the tick's health transitions to the board (on the board owner's thread)."""
        self.health.apply(res.health_changes)

    def eviction_paths(self, ev: Eviction) -> list[str]:
        return [c.cgroup_path for c in self.containers if c.pod_uid == ev.pod_uid and c.cgroup_path]

    def evictor(self) -> Evictor:
        """Who acts on an eviction now: the published ``EVICTOR`` while it accepts, else
        pressure's own report. Looked up per eviction, never kept nor swapped."""
        ev = self._evictor()
        return ev if ev is not None and ev.accepting() else self.report

    def _evict(self, ev: Eviction) -> None:
        act = self.evictor()
        try:
            outcome = act.execute(ev, self.eviction_paths(ev))
        except Exception as e:
            outcome = {"error": repr(e)}
        self.record_eviction(ev, act.name, outcome)

    def record_eviction(self, ev: Eviction, action: str, outcome: dict[str, Any]) -> None:
        self.record.add(ev, action, outcome)
        key = (ev.reason, ev.signal)
        self.evictions_total[key] = self.evictions_total.get(key, 0) + 1
        log.warning(
            "eviction", pod=f"{ev.pod_namespace}/{ev.pod_name}", uid=ev.pod_uid, reason=ev.reason, signal=ev.signal,
            action=action, pool=ev.pool, evidence=dict(ev.evidence), outcome=outcome,
        )

    def reconfigure(self, cfg: PressureConfig) -> None:
        """Take a config whose changes are all in LIVE_SETTINGS (the daemon's reload
        sorts the rest out as needing a restart)."""
        self.cfg = cfg
        self.evaluator.policy = EvictionPolicy(
            cfg.soft_threshold, cfg.hard_threshold, cfg.window_s, cfg.interval_s,
            cfg.met_fraction, cfg.cooldown_s, cfg.psi_confirm,
        )
        self.health.tracker.policy = HealthPolicy(cfg.error_threshold, cfg.error_window_s, cfg.recovery_s)
        self.report.hook = cfg.eviction_hook

    def _health_readings(self) -> tuple[dict, dict]:
        """(counters that start at zero with the probes, counters since boot)."""
        r: dict[tuple[str, str], dict[str, tuple[int, str]]] = {}
        boot: dict[tuple[str, str], dict[str, tuple[int, str]]] = {}
        for (dev, op, errno), n in self.last_block.errors.items():
            r.setdefault(("block", dev), {})[f"{op}:{errno}"] = (n, f"{op} I/O errors (errno {errno})")
        net = r if getattr(self.net, "source", "") == "bpf" else boot
        for name, c in self.last_net.items():
            net.setdefault(("net", name), {})["tx_errors"] = (c.tx_errors, "TX errors")
            net.setdefault(("net", name), {})["tx_timeouts"] = (c.tx_timeouts, "TX watchdog timeouts")
        for dev, n in self.last_extras.iommu_faults.items():
            r.setdefault(("pci", dev), {})["iommu_fault"] = (n, "IOMMU page faults")
        for key, counters in r.items():
            base = self._base.get(key, {})
            for name, (n, what) in list(counters.items()):
                counters[name] = (n - base.get(name, (0, ""))[0], what)
        return r, boot

    def _irq_rates(self, now: float) -> None:
        cur = self.last_extras.irqs
        prev = self._last_irq
        self._last_irq = (now, cur)
        if prev is None or now <= prev[0]:
            return
        dt = now - prev[0]
        self.irq_rates = {irq: (c - prev[1].get(irq, (0, 0))[0]) / dt for irq, (c, _u) in cur.items()}
        for irq, rate in self.irq_rates.items():
            if rate >= self.cfg.irq_storm_per_s:
                log.warning("irq storm", irq=irq, rate_per_s=round(rate), threshold=round(self.cfg.irq_storm_per_s))
