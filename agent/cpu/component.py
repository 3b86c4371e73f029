"""The CPU policy as a daemon component: restore, serve, enforce, tidy up.

Start order: read the checkpoint (a corrupt one stops start unless
``accept_state_loss``), build the policy (machine state regenerated from pod
entries, reserve/reclaim pools initialised), keep the snapshot and journal when
the policy is what they hold (else write a fresh snapshot; records replayed
are compacted on the first periodic pass, after READY), detect
the cgroup hierarchy, serve the socket, publish ``CPU_POLICY`` (the durable
policy itself, a ``CPUAllocator``) and start the periodic loops: residual cleanup, cpuset
check/repair (with ramp-up completion), cpu.idle sync.

Looks up nothing at start. The residual cleanup asks the active-pods source,
which admission publishes after this component started: a deferred
``ACTIVE_PODS``, inert until it is published.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from agent.daemonconfig import DAEMON_SECTION
from agent.advisor.config import ADVISOR_SECTION
from agent.cgroups.config import CGROUPS_SECTION, workload_roots
from agent.cgroups.detect import CgroupError, detect
from agent.cgroups.fs import CgroupFS, CgroupVanished
from agent.contracts import ACTIVE_PODS, CPU_POLICY, CPU_SHARED_POOL, ActivePods, Deferred
from agent.cgroups.paths import DEFAULT_WORKLOAD_ROOTS, reclaim_root_candidates, self_cgroups
from agent.contracts import MEMORY_MANAGER, DaemonContext, MemoryAllocator
from agent.cpu.checkpoint import CheckpointError, CheckpointStore
from agent.cpu.config import CPUConfig, CPU_SECTION, reclaim_min_for
from agent.cpu.durable import DurablePolicy
from agent.cpu.enforce import CheckReport, Enforcer
from agent.cpu.metrics import (
    CGROUP_UNRESOLVED,
    CPU_IDLE_WRITES,
    DRIFT_FOUND,
    DRIFT_REPAIRED,
    RESIDUAL_REMOVED,
)
from agent.cpu.periodic import ResidualTracker
from agent.cpu.policy import DynamicPolicy, PolicyOptions
from agent.cpu.pools import DedicatedNuma
from agent.cpu.errors import UNAVAILABLE, PolicyError
from agent.cpu.state import PolicyState, moved_keys
from agent.cpuset import CPUSet
from agent.eventlog import get_logger
from agent.statefile import Coalescer

__all__ = ["CPUPolicyComponent", "create", "dedicated_numa_for", "options_from_config", "socket_path_for"]

#: one enforcer pass's input: state, bound init containers' cgroups, fresh cgroups, pods to look at (None: all)
EnforceJob = tuple[PolicyState, dict[str, CPUSet], frozenset[str], frozenset[str] | None]

log = get_logger("hwagent.cpu")


def dedicated_numa_for(cfg: CPUConfig, mode: str) -> DedicatedNuma:
    """What a NUMA-bound dedicated pod takes out of the shared pools in daemon ``mode``.

    "auto": standalone runs its own pods, and a pinned job beside services on a
    one-node box is what the kubelet's static CPU manager, Slurm and Nomad give
    (exclusive-cores); in kubelet mode a QRM kubelet and its tooling expect
    Katalyst's pools (whole-node). A value the operator wrote wins."""
    if cfg.dedicated_numa != "auto":
        return cfg.dedicated_numa
    return "whole-node" if mode == "kubelet" else "exclusive-cores"


def options_from_config(cfg: CPUConfig, online: int, mode: str = "standalone") -> PolicyOptions:
    """The policy's options on a machine with ``online`` CPUs in daemon ``mode`` ("auto"
    values resolved here, where the topology and the mode are known)."""
    return PolicyOptions(
        reserved_count=cfg.reserved_cpus,
        reserved_list=cfg.reserved_list(),
        reclaim_min=reclaim_min_for(cfg, online),
        enable_reclaim=cfg.enable_reclaim,
        transition_period_s=cfg.transition_period_s,
        debug_annotation_keys=tuple(cfg.debug_annotation_keys),
        enhancement_defaults=dict(cfg.enhancement_defaults),
        align_l3=cfg.align_l3,
        dedicated_numa=dedicated_numa_for(cfg, mode),
    )


def socket_path_for(ctx: DaemonContext, cfg: CPUConfig) -> Path:
    """kubelet mode: the kubelet's plugin-watcher dir, where the kubelet finds
    and registers it. Standalone: ``<root>/cpu/`` — the policy is called
    in-process there, and hwagent's own plugin watcher (device plugins only)
    has no business with it; local clients and tests use the socket directly."""
    if ctx.mode == "kubelet":
        kubelet_root = Path(ctx.config[DAEMON_SECTION].kubelet_root_dir)
        return kubelet_root / "plugins_registry" / cfg.socket_name
    return ctx.path("cpu", cfg.socket_name)


class CPUPolicyComponent:
    name = "cpu"

    def __init__(self, cfg: CPUConfig, clock: Any = time.time) -> None:
        self.cfg = cfg
        self.clock = clock
        self.durable: DurablePolicy
        self.fs: CgroupFS | None = None
        self.enforcer: Enforcer | None = None
        self.enforce: Coalescer[EnforceJob] | None = None
        #: cgroups bound since the last enforcer pass (read and cleared as a pass starts)
        self._fresh: set[str] = set()
        #: the state the last enforcer pass started from, and whether the next one must look at every pod
        self._passed: PolicyState | None = None
        self._full_due = True
        self.residual = ResidualTracker(cfg.residual_cleanup_s)
        self.socket_path: Path | None = None
        self._server: Any = None
        self._reg: Any = None
        #: where bound cgroups may live (cgroups.workload_roots, read at start)
        self.cgroup_roots: tuple[str, ...] = DEFAULT_WORKLOAD_ROOTS
        #: cgroups.reclaim_cgroup ("" = look for the besteffort QoS cgroup), read at start
        self.reclaim_root = ""
        self._tasks: list[asyncio.Task[None]] = []
        self._ctx: DaemonContext | None = None
        self._active_pods: Deferred[ActivePods] = lambda: None
        #: the memory manager starts after the CPU policy: its nodes for a container it placed
        self._memory: Deferred[MemoryAllocator] = lambda: None
        self.last_check: CheckReport | None = None
        self._loop_errors = 0
        #: the start kept a journal with records in it: the first periodic pass compacts it
        self._compact_due = False

    async def start(self, ctx: DaemonContext) -> None:
        from agent.cpu.server import serve  # grpc import stays out of factory import time

        self.cgroup_roots = workload_roots(ctx.config)
        self.reclaim_root = ctx.config[CGROUPS_SECTION].reclaim_cgroup

        self._ctx = ctx
        self._active_pods = ctx.deferred(ACTIVE_PODS)
        self._memory = ctx.deferred(MEMORY_MANAGER)
        from agent.cpu.calculator import TopoIndex

        store = CheckpointStore(ctx.root_dir / "cpu", online=TopoIndex(ctx.topology).all)
        loop = asyncio.get_running_loop()
        try:
            state = await loop.run_in_executor(None, store.load, self.cfg.accept_state_loss)
        except CheckpointError as e:
            raise RuntimeError(str(e)) from None
        try:
            options = options_from_config(self.cfg, len(ctx.topology.online), ctx.mode)
            policy = DynamicPolicy(ctx.topology, options, state=state, clock=self.clock)
        except ValueError as e:
            raise RuntimeError(f"cpu policy cannot start: {e}") from None
        if self.cfg.enforce_cgroups:
            root = ctx.config[CGROUPS_SECTION].root
            try:
                self.fs = CgroupFS(detect(root))
                self.enforcer = Enforcer(self.fs, policy.idx.numa_of, mems_of=self._memory_nodes)
                self.enforce = Coalescer(self._enforce_work, "cpuset_enforce", snapshot=self._enforce_input,
                                         logger=log)
            except CgroupError as e:
                log.warning("cgroup enforcement disabled", reason=str(e))
            else:
                self._log_own_cgroup(ctx)
        self.durable = DurablePolicy(policy, store, on_enforce=self._kick_enforce, cgroup_roots=self.cgroup_roots,
                                     write_bound=self._write_bound if self.enforce is not None else None)
        self._compact_due = await loop.run_in_executor(None, store.open, state, policy.state,
                                                       lambda: self.durable.policy.state)
        if not ctx.config[ADVISOR_SECTION].enabled:
            # the last run's advisor may have grown the shared pool: with it off nobody would shrink it
            try:
                if await self.durable.static_pools():
                    log.info("cpu pools back to their request sizes", note="the checkpoint held the advisor's "
                             "pools; [advisor] is off", pools={k: str(v) for k, v in policy.state.pools.items()})
            except PolicyError as e:  # a refused re-size changes nothing: the pools stay as checkpointed
                log.warning("cpu pools kept as checkpointed", reason=e.message)
        self.socket_path = socket_path_for(ctx, self.cfg)
        self._server, self._reg = await serve(self.durable, self.socket_path)
        ctx.publish(CPU_POLICY, self.durable)
        ctx.publish(CPU_SHARED_POOL, self.durable)
        self._kick_enforce(policy.state)
        self._tasks = [
            loop.create_task(self._every(self.cfg.cpuset_check_interval_s, self.check_once)),
            loop.create_task(self._every(self.cfg.residual_check_interval_s, self.residual_once)),
        ]
        if self.cfg.sync_cpu_idle and self.fs is not None:
            self._tasks.append(loop.create_task(self._every(self.cfg.cpu_idle_interval_s, self.cpu_idle_once)))
        log.info(
            "cpu policy started", socket=self.socket_path, mode=ctx.mode, reserved=policy.reserved,
            reclaim_min=policy.options.reclaim_min, dedicated_numa=policy.options.dedicated_numa,
            containers=len(policy.state.containers()), enforcement=self.fs.layout.mode if self.fs else "off",
        )

    def _memory_nodes(self, pod_uid: str, container: str) -> CPUSet | None:
        """cpuset.mems of a container the memory manager placed: the nodes of its memory
        blocks (one dict lookup, safe from the enforcer's worker thread)."""
        mm = self._memory()
        blocks = mm.blocks(pod_uid, container) if mm is not None else ()
        return CPUSet({n for b in blocks for n in b.numa_nodes}) if blocks else None

    def _log_own_cgroup(self, ctx: DaemonContext) -> None:
        """hwagent's own cpuset cgroup: if it sits under kubepods, the policy may
        narrow the CPUs hwagent itself runs on — worth a warning at start."""
        try:
            own = self_cgroups(ctx.config[DAEMON_SECTION].procfs_root)
        except OSError:
            return
        path = own.get("cpuset") or own.get("", "/")
        log.info("own cgroup", cpuset=path)
        if "kubepods" in path:
            log.warning("own cgroup under kubepods", path=path, note="hwagent's CPUs follow the policy's cpusets")

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []
        if self._server is not None:
            await self._server.stop(0.5)
            self._server = None
        if hasattr(self, "durable"):
            with contextlib.suppress(Exception):
                await self.durable.wait_durable()
            if self.durable.store is not None:
                with contextlib.suppress(Exception):  # a clean stop leaves one checksummed snapshot, no journal
                    await self.durable.store.journal.compact_now()
                with contextlib.suppress(Exception):
                    await self.durable.store.journal.close()
        if self.enforce is not None:
            with contextlib.suppress(Exception):
                await self.enforce.drain()
        if self.socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
        if self._ctx is not None:
            self._ctx.withdraw(CPU_POLICY)
            self._ctx.withdraw(CPU_SHARED_POOL)

    def healthy(self) -> bool:
        if self._server is None or self.socket_path is None or not self.socket_path.is_socket():
            return False
        if self._ctx is not None and self._ctx.mode == "kubelet" and self._reg is not None and self._reg.registered is False:
            return False  # the kubelet refused us: nothing will call the policy
        return self._loop_errors == 0

    # -- enforcement ----------------------------------------------------------------
    def _kick_enforce(self, st: PolicyState) -> None:
        if self.enforce is None:
            return
        try:
            self.enforce.submit()  # the run reads the state when it starts (_enforce_input)
        except RuntimeError:  # no running loop (policy used off-loop)
            pass

    def _enforce_input(self) -> EnforceJob:
        """What one enforcer pass works on, read on the loop as the pass starts: the
        state, the bound init containers' cgroups (the shared pool), the cgroups
        bound since the last pass (fresh: their first write is no drift), and the pods
        to look at: those whose placement changed since the last pass (``moved_keys``),
        or None for every pod (the periodic check, the first pass, a pass after one
        that failed, a launch's freshly bound cgroup, a change the policy cannot name)."""
        st = self.durable.policy.state
        fresh, self._fresh = frozenset(self._fresh), set()
        only: frozenset[str] | None = None
        if not self._full_due and self._passed is not None and not fresh:  # a launch's bound cgroup: all
            keys = moved_keys(self._passed, st)
            only = None if keys is None else frozenset(uid for uid, _ in keys)
        self._full_due, self._passed = False, st
        return st, self.durable.follower_targets(st), fresh, only

    async def _write_bound(self, path: str) -> bool:
        """A container's cgroup was just bound: one enforcer pass that writes it, before
        its launcher lets a process join (the enforcer is the one writer of a bound
        cgroup's cpuset files; the launcher made it with its parent's). Raises when the
        pass could not write it, so that nothing starts on CPUs the policy did not give."""
        assert self.enforce is not None and self.enforcer is not None
        self._fresh.add(path)
        await self.enforce.flush()
        if ("cpus", path) in self.enforcer.enforced:
            return True
        rep = self.last_check
        why = next((e for r, e in rep.errors if r == path), None) if rep is not None else None
        if why is None:
            why = "the cgroup is gone" if rep is not None and path in rep.vanished else "no placement for it"
        raise PolicyError(UNAVAILABLE, "cpuset_not_written", f"cpuset of {path} not written: {why}")

    def _enforce_work(self, job: EnforceJob) -> CheckReport:
        assert self.enforcer is not None
        st, followers, fresh, only = job
        try:
            rep = self.enforcer.sync(st, repair=self.cfg.repair_drift, followers=followers, fresh=fresh, only=only)
        except BaseException:
            self._full_due = True  # what this pass was to look at is looked at by the next
            raise
        if rep.drift:
            DRIFT_FOUND.inc(len(rep.drift))
        if rep.repaired:
            DRIFT_REPAIRED.inc(len(rep.repaired))
        if only is None:
            CGROUP_UNRESOLVED.set(rep.unresolved)
        self.last_check = rep
        return rep

    async def check_once(self) -> CheckReport | None:
        """Ramp-up completion, then a full cpuset check (detect + repair). The first pass
        after a start that replayed records also has the journal compact them (in the
        background, through its writer: one snapshot at a time, after READY)."""
        if self._compact_due and self.durable.store is not None:
            self._compact_due = False
            self.durable.store.journal.request_snapshot()
        self.durable.policy.complete_ramp_up()
        await self.durable.wait_durable()
        if self.enforce is None:
            return None
        self._full_due = True  # every pod, drift included
        await self.enforce.flush()
        return self.last_check

    async def residual_once(self) -> list[str]:
        source = self._active_pods()
        if source is None:
            return []
        active = source.active_pod_uids()
        due = self.residual.due(self.durable.policy.state.entries.keys(), active, self.clock())
        for uid in due:
            log.info("residual pod removed", pod_uid=uid, after_s=f"{self.cfg.residual_cleanup_s:g}")
            self.durable.policy.remove_pod(uid)
            self.residual.forget(uid)
            RESIDUAL_REMOVED.inc()
        if due:
            await self.durable.wait_durable()
        return due

    def reclaim_cgroup(self) -> str | None:
        if self.reclaim_root:
            return self.reclaim_root
        assert self.fs is not None
        for rel in reclaim_root_candidates():
            if self.fs.cpu_cgroup_exists(rel):
                return rel
        return None

    async def cpu_idle_once(self) -> bool:
        if self.fs is None:
            return False
        rel = self.reclaim_cgroup()
        if rel is None:
            return False
        value = 1 if self.cfg.cpu_idle else 0
        try:
            wrote = await asyncio.get_running_loop().run_in_executor(None, self.fs.write_cpu_idle, rel, value)
        except CgroupVanished:
            return False
        except FileNotFoundError:
            log.warning("cpu idle unsupported", path=rel)
            return False
        if wrote:
            CPU_IDLE_WRITES.inc()
            log.info("cpu idle set", path=rel, value=value)
        return wrote

    async def _every(self, period: float, fn: Any) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                await fn()
                self._loop_errors = 0
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a periodic pass must not kill the loop
                self._loop_errors += 1
                log.exception("cpu periodic failed", task=getattr(fn, "__name__", fn))


def create(ctx: DaemonContext) -> CPUPolicyComponent | None:
    cfg: CPUConfig = ctx.config[CPU_SECTION]
    if not cfg.enabled:
        return None
    return CPUPolicyComponent(cfg)
