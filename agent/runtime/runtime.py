"""The workload runtime: runs admitted pods, supervises them, survives restarts.

One ``_Pod`` per admitted pod, driven by one task on the daemon's loop: init
containers in order to completion, then every app container in its own loop
(start through the shim, wait for the exit, restart by policy with the
crash-loop back-off). Status changes go to the ``PodStatusSink`` (admission's
registry) in order, per pod; a terminal phase there releases the pod's CPUs
and devices. The runtime allocates nothing: it creates, binds and removes
cgroups and processes.

Blocking cgroup teardown (kill, then wait until the cgroup is empty, rmdir)
runs in the default executor; creating and writing a cgroup is a few dozen
sub-millisecond writes and stays on the loop, on the launch's critical path.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import re
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.cgroups.devbpf import DeviceProgramError
from agent.cgroups.oom import oom_kills
from agent.cgroups.workload import CgroupSetupError, WorkloadCgroups
from agent.contracts import PodStatusSink
from agent.contracts.processes import ContainerProcesses, PodProcesses
from agent.cpuset import CPUSet
from agent.eventlog import get_logger
from agent.runtime.backoff import Backoff
from agent.runtime.config import RuntimeConfig
from agent.runtime.launcher import LaunchError, Started, attach, shim_command, spawn, wait_exit
from agent.runtime.logdir import log_dir, prepare_log_file
from agent.runtime.lifecycle import (
    app_phase, exit_reason, pod_end_time, remaining_grace, should_restart, should_restart_init,
)
from agent.runtime.plan import DevNum, LaunchPlan, PlanError, device_number, plan_container
from agent.runtime.state import STATE_DIR, ExitInfo, PodFiles, PodRecord
from agent.contracts.pods import (
    QOS_RECLAIMED,
    AdmittedPod,
    ContainerSpec,
    ContainerState,
    ContainerStatus,
    PodPhase,
    PodStatus,
)

__all__ = ["WorkloadRuntime", "pod_dir_name", "log_dir"]

log = get_logger("hwagent.runtime")

_UID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def pod_dir_name(uid: str) -> str:
    """The pod's cgroup directory name (``pod<uid>``, as the kubelet's cgroupfs driver)."""
    if not _UID.match(uid):
        raise PlanError(f"pod uid {uid!r} cannot name a cgroup (letters, digits, '.', '_', '-')")
    return f"pod{uid}"


class _StartFailed(Exception):
    pass


@dataclass
class _Ctr:
    spec: ContainerSpec
    rel: str
    status: ContainerStatus
    started: Started | None = None
    bound: bool = False


@dataclass
class _Pod:
    pod: AdmittedPod
    files: PodFiles
    record: PodRecord
    ctrs: dict[str, _Ctr]
    phase: PodPhase = PodPhase.PENDING
    reason: str = ""
    message: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    task: asyncio.Task[None] | None = None
    stop_task: asyncio.Task[None] | None = None
    stopping: bool = False
    finished: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: set once the first container started or the pod failed to start
    first: asyncio.Event = field(default_factory=asyncio.Event)
    report_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    app_tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def uid(self) -> str:
        return self.pod.uid


class WorkloadRuntime:
    """Implements ``agent.contracts.PodRuntime``."""

    def __init__(
        self,
        cfg: RuntimeConfig,
        cgroups: WorkloadCgroups,
        root_dir: Path,
        sink: Callable[[], PodStatusSink | None],
        *,
        cpu_policy: Callable[[], Any] = lambda: None,
        managed_devices: Callable[[], Iterable[str]] = lambda: (),
        node_memory: int | None = None,
        hugepage_sizes: Callable[[], Iterable[int]] = lambda: (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = cfg
        self.cgroups = cgroups
        self.root_dir = Path(root_dir)
        self.state_root = self.root_dir / STATE_DIR
        self._sink = sink
        self._cpu_policy = cpu_policy
        self._managed_devices = managed_devices
        self.node_memory = node_memory
        self._hugepage_sizes = hugepage_sizes
        self.clock = clock
        self.shim = shim_command(cfg.shim)
        self.all_mems = CPUSet.parse(cgroups.root_mems())
        self._pods: dict[str, _Pod] = {}
        self._bg: set[asyncio.Task[Any]] = set()
        #: the managed devices the running containers' device rules were last written for (None:
        #: not since start); a device that joins the set is denied to them too (``_confine``)
        self._confined: frozenset[DevNum] | None = None

    # -- PodRuntime ---------------------------------------------------------------------
    def owns_cgroup(self, rel_path: str) -> bool:
        return self.cgroups.owns(rel_path)

    def pods(self) -> list[str]:
        return list(self._pods)

    def status(self, uid: str) -> PodStatus | None:
        p = self._pods.get(uid)
        return None if p is None else self._status(p)

    def signal(self, uid: str, containers: Sequence[str], sig: int) -> dict[str, tuple[int, ...]]:
        """Every process of each named container gets ``sig``, as the kernel lists them in the
        container's cgroup now (a fork the workload made is reached too; the shim, outside
        the cgroup, is not, so it still records the exit). The runtime does not act on the
        signal: a process it ends is an exit like any other, with its restart policy."""
        p = self._pods.get(uid)
        out: dict[str, tuple[int, ...]] = {}
        for name in containers:
            ctr = p.ctrs.get(name) if p is not None and not p.finished else None
            out[name] = self.cgroups.signal(ctr.rel, sig) if ctr is not None and self.cgroups.exists(ctr.rel) else ()
        if any(out.values()):
            log.info("signal sent", pod=p.pod.spec.key if p else uid, signal=sig,
                     pids=",".join(str(x) for v in out.values() for x in v))
        return out

    def processes(self, uid: str) -> PodProcesses | None:
        p = self._pods.get(uid)
        if p is None:
            return None
        rel = _pod_rel(p)
        return PodProcesses(cgroup=rel, cgroup_dirs=tuple(self.cgroups.dirs(rel)), containers={
            name: ContainerProcesses(ctr.rel, tuple(sorted(self.cgroups.pids(ctr.rel)))
                                     if self.cgroups.exists(ctr.rel) else ())
            for name, ctr in p.ctrs.items()})

    async def run(self, pod: AdmittedPod) -> None:
        if pod.uid in self._pods:  # idempotent: a second hand-over (e.g. racing restore) changes nothing
            log.info("pod already running", pod=pod.spec.key, uid=pod.uid)
            return
        p = self._new_pod(pod, PodRecord(pod.uid, pod.spec.key))
        self._pods[pod.uid] = p
        # the pod's state dir exists before any of its cgroups: restore() treats as orphans
        # only pods this runtime has state for, never another daemon's cgroups in the subtree
        await self._save(p)
        p.task = asyncio.get_running_loop().create_task(self._main(p, {}), name=f"pod-{pod.spec.key}")
        await self._wait_first(p)

    async def stop(self, uid: str, grace_s: float | None = None, reason: str = "Stopped") -> None:
        await self._stop(uid, grace_s, reason, "")

    async def evict(self, uid: str, message: str) -> None:
        await self._stop(uid, None, "Evicted", message)

    async def restore(self, pods: Sequence[AdmittedPod]) -> None:
        known = {p.uid: p for p in pods}
        await self._remove_orphans(set(known))
        for pod in pods:
            if pod.uid in self._pods:
                continue
            files = PodFiles(self.state_root, pod.uid)
            rec = files.load() or PodRecord(pod.uid, pod.spec.key)
            p = self._new_pod(pod, rec, restoring=True)
            self._pods[pod.uid] = p
            resume: dict[str, Started | ExitInfo] = {}
            for c in pod.spec.all_containers():
                ctr = p.ctrs[c.name]
                cf = files.container(c.name)
                st = attach(cf)
                if st is not None:
                    resume[c.name] = st
                    ctr.started = st
                    crec = rec.container(c.name)
                    if crec.started_at is None:  # killed before the start was recorded: the restore bounds it
                        crec.started_at = self.clock()
                    ctr.status = replace(ctr.status, state=ContainerState.RUNNING, reason="", pid=st.pid,
                                         started_at=crec.started_at)
                    p.record.running = p.record.running or c.kind == "app"
                    self._reapply(p, ctr)
                    await self._bind(p, ctr, ctr.rel)  # an init container's following is in memory only
                    continue
                info = cf.exit()
                if cf.pids() is not None and info is None:
                    info = ExitInfo(137, message="exit status lost: the container's shim was gone at restore")
                if info is not None and (cf.pids() is not None or not info.started):
                    oom = info.exit_code != 0 and oom_kills(self.cgroups.read, ctr.rel) > 0
                    resume[c.name] = replace(info, oom=True) if oom else info
                if self.cgroups.exists(ctr.rel):
                    await self._teardown(ctr.rel)
            log.info(
                "pod restored", pod=pod.spec.key, uid=pod.uid,
                running=",".join(k for k, v in resume.items() if isinstance(v, Started)) or "-",
                exited=",".join(k for k, v in resume.items() if isinstance(v, ExitInfo)) or "-",
            )
            if any(isinstance(v, Started) for v in resume.values()):
                await self._reattached(p)
            p.task = asyncio.get_running_loop().create_task(self._main(p, resume), name=f"pod-{pod.spec.key}")
            if rec.stopping is not None:
                self._stop_soon(p, remaining_grace(rec.stop_deadline, rec.stop_grace_s, self.clock()),
                                *rec.stopping)
        # the set may have grown while no daemon ran (a device, a claim, an upgrade that counts more)
        await self._confine(self._managed())

    async def _reattached(self, p: _Pod) -> None:
        """A restored pod with live containers says so: Running (with their pids) once its
        app containers run, before its supervisor reports anything else.

        The registry cannot be trusted to know: a kill just after an acknowledged
        admission lands after the shim started the workload but before pod.json
        recorded the start, or before the start was reported, and the registry's
        record then stays Pending (Admitted), pid 0, while the workload runs."""
        p.phase = PodPhase.RUNNING if p.record.running else PodPhase.PENDING
        if p.phase == PodPhase.RUNNING:
            starts = [c.status.started_at for c in p.ctrs.values() if c.status.started_at is not None]
            p.started_at = min(starts, default=None)
        await self._save(p)
        await self._report(p)

    async def close(self, stop_workloads: bool) -> None:
        """Daemon shutdown: stop every pod, or leave them running (detach)."""
        if stop_workloads:
            await asyncio.gather(*(self.stop(uid) for uid in list(self._pods)), return_exceptions=True)
            return
        for p in list(self._pods.values()):
            for t in [p.task, p.stop_task, *p.app_tasks]:
                if t is not None:
                    t.cancel()
        tasks = [t for p in self._pods.values() for t in (p.task, p.stop_task, *p.app_tasks) if t is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in list(self._bg):
            t.cancel()
        self._pods.clear()

    # -- pods ---------------------------------------------------------------------------
    def _new_pod(self, pod: AdmittedPod, rec: PodRecord, restoring: bool = False) -> _Pod:
        """``restoring``: the pod's cgroup is looked for in both subtrees (one a runtime
        configured otherwise made); a new pod's is where its class goes."""
        ctrs = {}
        pdir = pod_dir_name(pod.uid)
        reclaimed = pod.qos == QOS_RECLAIMED
        prel = self.cgroups.find_pod(pdir, reclaimed) if restoring else self.cgroups.path(pdir, reclaimed=reclaimed)
        for c in pod.spec.all_containers():
            r = rec.container(c.name)
            if r.done:  # a completed init container (pod.json says so after a restart) stays Completed
                status = ContainerStatus(c.name, state=ContainerState.TERMINATED, reason="Completed", exit_code=0,
                                         restart_count=r.restarts, started_at=r.started_at, finished_at=r.finished_at)
            else:
                status = ContainerStatus(c.name, reason="ContainerCreating" if c.kind == "app" else "PodInitializing",
                                         restart_count=r.restarts, exit_code=r.last_exit_code)
            ctrs[c.name] = _Ctr(c, self.cgroups.check(f"{prel}/{c.name}"), status)
        return _Pod(pod, PodFiles(self.state_root, pod.uid), rec, ctrs)

    async def _wait_first(self, p: _Pod) -> None:
        assert p.task is not None
        waiter = asyncio.ensure_future(p.first.wait())
        await asyncio.wait({waiter, p.task}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()

    async def _main(self, p: _Pod, resume: dict[str, Started | ExitInfo]) -> None:
        spec = p.pod.spec
        try:
            for c in spec.init_containers:
                if p.record.container(c.name).done:
                    continue
                if not await self._run_init(p, p.ctrs[c.name], resume.pop(c.name, None)):
                    return
            if not p.record.running:
                p.record.running = True
            loop = asyncio.get_running_loop()
            p.app_tasks = [loop.create_task(self._run_app(p, p.ctrs[c.name], resume.pop(c.name, None)))
                           for c in spec.containers]
            # the first container that cannot start fails the pod at once, even while others run
            done, _pending = await asyncio.wait(p.app_tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                if not t.cancelled() and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
            await asyncio.gather(*p.app_tasks, return_exceptions=True)
            if p.stopping:
                return
            phase = app_phase(spec.restart_policy, [p.ctrs[c.name].status for c in spec.containers])
            if phase is not None:
                await self._finish(p, phase, "Completed" if phase == PodPhase.SUCCEEDED else "Error", "")
        except _StartFailed as e:
            if not p.stopping:
                for t in p.app_tasks:
                    t.cancel()
                await self._finish(p, PodPhase.FAILED, "StartError", str(e))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a bug must end the pod visibly, not hang it
            log.exception("pod supervisor failed", pod=spec.key)
            await self._finish(p, PodPhase.FAILED, "RuntimeError", f"runtime error: {e!r}")
        finally:
            p.first.set()

    async def _run_init(self, p: _Pod, ctr: _Ctr, state: Started | ExitInfo | None) -> bool:
        policy = p.pod.spec.restart_policy
        rec = p.record.container(ctr.spec.name)
        while state is not None or not p.stopping:  # a stop starts nothing new, but watches what runs
            info = await self._run_once(p, ctr, state)
            state = None
            if p.stopping:
                return False
            if info.exit_code == 0:
                rec.done = True
                await self._save(p)
                return True
            if not should_restart_init(policy, info.exit_code):
                await self._finish(p, PodPhase.FAILED, "InitContainerFailed",
                                   f"init container {ctr.spec.name} exited with {info.exit_code}")
                return False
            await self._back_off(p, ctr, info)
        return False

    async def _run_app(self, p: _Pod, ctr: _Ctr, state: Started | ExitInfo | None) -> None:
        policy = p.pod.spec.restart_policy
        while state is not None or not p.stopping:  # a stop starts nothing new, but watches what runs
            info = await self._run_once(p, ctr, state)
            state = None
            if p.stopping or not should_restart(policy, info.exit_code):
                return
            await self._back_off(p, ctr, info)

    async def _run_once(self, p: _Pod, ctr: _Ctr, state: Started | ExitInfo | None) -> ExitInfo:
        """One run of a container: start (unless resumed), wait, record the exit."""
        if state is None:
            state = await self._start(p, ctr)
        if isinstance(state, Started):
            info = await wait_exit(state, p.files.container(ctr.spec.name))
        else:
            info = state
        if not info.started:
            raise _StartFailed(f"container {ctr.spec.name}: {info.start_error}")
        ctr.started = None
        now = self.clock()
        rec = p.record.container(ctr.spec.name)
        rec.last_exit_code = info.exit_code
        rec.finished_at = info.finished_at or now
        # read while the run's cgroup still exists (a resumed exit read it at restore, before its teardown)
        oom = info.exit_code != 0 and (info.oom or oom_kills(self.cgroups.read, ctr.rel) > 0)
        ctr.status = replace(ctr.status, state=ContainerState.TERMINATED, pid=None, exit_code=info.exit_code,
                             finished_at=rec.finished_at, reason=exit_reason(info.exit_code, info.signal, oom),
                             message=info.message or _exit_message(info, oom, ctr.spec))
        log.info("container exited", pod=p.pod.spec.key, container=ctr.spec.name, exit_code=info.exit_code)
        await self._teardown(ctr.rel)
        if not p.stopping:
            await self._save(p)
            if not self._ends_pod(p, ctr, info):
                await self._report(p)
        return info

    def _ends_pod(self, p: _Pod, ctr: _Ctr, info: ExitInfo) -> bool:
        """This exit ends the pod: an app container that will not restart, and every other app
        container ended too. ``_main`` then finishes the pod at once and reports its end with
        this container's status in it; reporting the exit first was a second registry write
        (synced) for the same event (docs/performance.md). The exit is in this runtime's own
        files (``_save``): a daemon killed in between reports the pod's end after its restart."""
        spec = p.pod.spec
        if ctr.spec.kind == "init" or should_restart(spec.restart_policy, info.exit_code):
            return False
        return app_phase(spec.restart_policy, [p.ctrs[c.name].status for c in spec.containers]) is not None

    async def _back_off(self, p: _Pod, ctr: _Ctr, info: ExitInfo) -> None:
        rec = p.record.container(ctr.spec.name)
        ran = (rec.finished_at or 0) - (rec.started_at or rec.finished_at or 0)
        b = Backoff(self.cfg.backoff_initial_s, self.cfg.backoff_max_s, self.cfg.backoff_reset_s,
                    rec.backoff_s).after_exit(ran)
        rec.backoff_s = b.current_s
        ctr.status = replace(ctr.status, state=ContainerState.WAITING, reason="CrashLoopBackOff",
                             message=f"back-off {b.current_s:g}s restarting failed container {ctr.spec.name}")
        await self._save(p)
        await self._report(p)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(p.wake.wait(), b.current_s)
        if not p.stopping:
            rec.restarts += 1
            ctr.status = replace(ctr.status, restart_count=rec.restarts)

    # -- starting -------------------------------------------------------------------------
    def _managed(self) -> list[DevNum]:
        out: list[DevNum] = []
        paths = list(self._managed_devices())
        for pattern in self.cfg.managed_devices:
            paths += glob.glob(pattern)
        for path in dict.fromkeys(paths):
            try:
                num = device_number(path)
            except OSError:
                continue
            if num is not None:
                out.append(num)
        return out

    def _plan(self, p: _Pod, ctr: _Ctr, managed: list[DevNum] | None = None) -> LaunchPlan:
        assignment = p.pod.assignments.get(ctr.spec.name)
        if assignment is None:
            raise PlanError(f"container {ctr.spec.name} has no assignment from admission")
        return plan_container(p.pod, ctr.spec, assignment, self.cfg, all_mems=self.all_mems,
                              managed=self._managed() if managed is None else managed,
                              node_memory=self.node_memory, hugepage_sizes=self._hugepage_sizes())

    async def _confine(self, managed: list[DevNum], starting: _Ctr | None = None) -> None:
        """Deny a device that joined the managed set to the containers already running: one
        plugged in, a ``managed_devices`` glob that matches more, a held node no rule offers
        (an outside plugin's CDI names). Their rules were written for the set of their start,
        and without this a pod that started first could open the device another pod is given
        now. A container that holds the device keeps it (its plan grants it). ``strict`` denies
        everything not granted anyway. A descriptor opened before stays open: the kernel asks
        the devices cgroup at open only."""
        now = frozenset(managed)
        if self._confined is not None and now <= self._confined:
            return
        self._confined = now
        if self.cfg.device_policy == "strict":
            return
        for p in list(self._pods.values()):
            for ctr in p.ctrs.values():
                if ctr is starting or ctr.started is None or ctr.status.state != ContainerState.RUNNING:
                    continue
                try:
                    limits = self._plan(p, ctr, managed).limits
                    progs = self.cgroups.device_programs
                    if progs is not None and not progs.ready(limits):
                        await asyncio.get_running_loop().run_in_executor(None, progs.prepare, limits)
                    self.cgroups.reapply(ctr.rel, limits, devices=True)
                except (PlanError, CgroupSetupError, DeviceProgramError, OSError) as e:
                    log.warning("device rules of a running container not updated", pod=p.pod.spec.key,
                                container=ctr.spec.name, error=e)

    async def _start(self, p: _Pod, ctr: _Ctr) -> Started:
        name = ctr.spec.name
        try:
            managed = self._managed()
            await self._confine(managed, ctr)
            plan = self._plan(p, ctr, managed)
            progs = self.cgroups.device_programs
            if progs is not None and not progs.ready(plan.limits):
                # the first pod with these device rules: compile off the loop (bcc, ~0.5 s)
                await asyncio.get_running_loop().run_in_executor(None, progs.prepare, plan.limits)
            policy = self._cpu_policy()
            # with a CPU policy, it writes the cpuset files (their one writer), before anything joins
            procs = self.cgroups.create(ctr.rel, plan.limits, cpuset=policy is None)
        except (PlanError, CgroupSetupError, DeviceProgramError) as e:
            raise _StartFailed(f"container {name}: {e}") from None
        if policy is not None:
            try:
                await self._place(p, ctr, policy)
            except _StartFailed:
                await self._teardown(ctr.rel)
                raise
        files = p.files.container(name)
        try:
            files.prepare()
        except OSError as e:  # a link planted at the pod's state dir, a full disk
            await self._teardown(ctr.rel)
            raise _StartFailed(f"container {name}: state: {e.strerror or e}") from None
        binds = plan.binds
        if plan.user_nodes and plan.user is not None:
            from agent.runtime.usernodes import make_user_nodes

            try:
                binds += tuple(make_user_nodes(files.path, plan.user_nodes, plan.user))
            except OSError as e:
                await self._teardown(ctr.rel)
                raise _StartFailed(f"container {name}: device node for its user: cannot make {e.filename}: "
                                   f"{e.strerror}") from None
        rec = p.record.container(name)
        launched_at = self.clock()
        try:
            for target in _create_targets(binds):
                if target not in rec.created:
                    rec.created.append(target)
        except OSError as e:
            await self._teardown(ctr.rel)
            raise _StartFailed(f"container {name}: mount: cannot create {e.filename}: {e.strerror}") from None
        try:
            log_path = prepare_log_file(self.root_dir, p.pod.spec.namespace, p.pod.spec.name, name, plan.user)
        except OSError as e:
            await self._teardown(ctr.rel)
            raise _StartFailed(f"container {name}: logs: {e.strerror or e}") from None
        try:
            started = await spawn(self.shim, files, log_path, log_max=self.cfg.log_max_bytes,
                                  log_keep=self.cfg.log_keep, cwd=plan.cwd, procs=procs, binds=binds,
                                  argv=plan.argv, env=plan.env, user=plan.user, rlimits=plan.rlimits)
        except LaunchError as e:
            await self._teardown(ctr.rel)
            raise _StartFailed(f"container {name}: {e.stage}: {e}") from None
        now = launched_at
        rec.started_at = now
        ctr.started = started
        ctr.status = replace(ctr.status, state=ContainerState.RUNNING, reason="", message="", pid=started.pid,
                             started_at=now, finished_at=None, exit_code=None)
        log.info("container started", pod=p.pod.spec.key, container=name, pid=started.pid, cgroup=ctr.rel)
        if p.stopping:  # a stop began while we were starting: it must not miss this one
            with contextlib.suppress(ProcessLookupError):
                os.kill(started.pid, signal.SIGTERM)
        if ctr.spec.kind == "app" and p.phase == PodPhase.PENDING and all(
                c.status.state == ContainerState.RUNNING for c in p.ctrs.values() if c.spec.kind == "app"):
            p.phase = PodPhase.RUNNING
            p.started_at = p.started_at or now
        p.first.set()
        await self._save(p)
        await self._report(p)
        return started

    async def _place(self, p: _Pod, ctr: _Ctr, policy: Any) -> None:
        """The new cgroup is bound to the CPU policy before the process joins it, and the
        bind returns once the policy's enforcer wrote its cpuset files: the process
        starts on the CPUs its owner gives it now, not on the admission's (a pool may
        have moved since; a restarted container used to run there until the next pass).
        Without enforcement the runtime writes the policy's placement itself, once."""
        name = ctr.spec.name
        try:
            written = await policy.bind_cgroup(p.uid, name, ctr.rel)
            ctr.bound = True
            if not written:
                where = policy.placement(p.uid, name)
                if where is None or not where.cpus:
                    raise PlanError("the CPU policy holds no CPUs for it")
                self.cgroups.write_cpuset(ctr.rel, where.cpus, where.mems or self.all_mems)
        except Exception as e:  # noqa: BLE001 - nothing may start on CPUs nobody gave it
            raise _StartFailed(f"container {name}: cpuset: {e}") from None

    async def _bind(self, p: _Pod, ctr: _Ctr, rel: str | None) -> None:
        policy = self._cpu_policy()
        if policy is None:
            return
        try:
            await policy.bind_cgroup(p.uid, ctr.spec.name, rel)
            ctr.bound = rel is not None
        except Exception as e:  # noqa: BLE001 - not in the CPU policy's state (e.g. released): nothing to bind
            log.debug("bind cgroup skipped", pod=p.uid, container=ctr.spec.name, error=e)

    async def _unbind_left(self, p: _Pod, ctr: _Ctr) -> None:
        """After the pod's end was reported: unbind a container whose pod the CPU policy still
        holds (nobody released it). The report's release drops the binding with the pod, and
        unbinding first was one more committed policy change, and enforcer pass, per job (issue
        23). Until then the policy names a cgroup that is gone, which its enforcer takes as
        vanished; a daemon killed in between does the same after its restart, until the restored
        runtime's report of the end releases the pod."""
        policy = self._cpu_policy()
        if policy is not None and policy.placement(p.uid, ctr.spec.name) is None:
            ctr.bound = False
            return
        await self._bind(p, ctr, None)

    def _reapply(self, p: _Pod, ctr: _Ctr) -> None:
        try:
            changed = self.cgroups.reapply(ctr.rel, self._plan(p, ctr).limits)
        except (PlanError, CgroupSetupError, OSError) as e:
            log.warning("cgroup reapply failed", pod=p.pod.spec.key, container=ctr.spec.name, error=e)
            return
        if changed:
            log.warning("cgroup drift repaired", pod=p.pod.spec.key, container=ctr.spec.name, files=",".join(changed))

    # -- stopping -------------------------------------------------------------------------
    def _stop_soon(self, p: _Pod, grace_s: float | None, reason: str, message: str) -> None:
        if p.stop_task is None:
            p.stop_task = asyncio.get_running_loop().create_task(self._stop_pod(p, grace_s, reason, message))

    async def _stop(self, uid: str, grace_s: float | None, reason: str, message: str) -> None:
        p = self._pods.get(uid)
        if p is None:
            # nothing of it runs here: say so, so that the registry can end it and release
            sink = self._sink()
            if sink is not None:
                await sink.pod_status_changed(uid, PodStatus(
                    phase=PodPhase.FAILED, reason=reason, message=message or "not running in the workload runtime",
                    finished_at=self.clock()))
            return
        self._stop_soon(p, grace_s, reason, message)
        assert p.stop_task is not None
        await asyncio.shield(p.stop_task)

    async def _stop_pod(self, p: _Pod, grace_s: float | None, reason: str, message: str) -> None:
        if p.finished:
            return
        p.stopping = True
        p.wake.set()
        grace = p.pod.spec.termination_grace_period_s if grace_s is None else grace_s
        if p.record.stopping is None or p.record.stop_deadline is None:  # a resumed stop keeps its deadline
            p.record.stop_deadline, p.record.stop_grace_s = self.clock() + grace, grace
        p.record.stopping = (reason, message)
        await self._save(p)
        for ctr in p.ctrs.values():
            if ctr.started is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(ctr.started.pid, signal.SIGTERM)
        tasks = [t for t in (p.task, *p.app_tasks) if t is not None and not t.done()]
        if tasks and grace > 0:
            await asyncio.wait(tasks, timeout=grace)
        for ctr in p.ctrs.values():
            await self._teardown(ctr.rel)
        tasks = [t for t in (p.task, *p.app_tasks) if t is not None and not t.done()]
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=self.cfg.kill_timeout_s)
            for t in pending:
                t.cancel()
        statuses = [c.status for c in p.ctrs.values() if c.spec.kind == "app"]
        ok = reason != "Evicted" and all(s.state == ContainerState.TERMINATED and s.exit_code == 0 for s in statuses)
        await self._finish(p, PodPhase.SUCCEEDED if ok else PodPhase.FAILED, reason, message)

    async def _teardown(self, rel: str) -> None:
        if not self.cgroups.exists(rel):  # a few stats: cheaper than the executor hop
            return
        if not self.cgroups.remove(rel, timeout_s=0):
            # empty already (the usual case after an exit): rmdir without waiting; a cgroup with
            # a process left refuses its rmdir (EBUSY) in every hierarchy the process is in, and
            # is killed and removed below (no pids walk first: it found the same)
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._teardown_sync, rel)

    def _teardown_sync(self, rel: str) -> None:
        if not self.cgroups.exists(rel):
            return
        if not self.cgroups.kill(rel, self.cfg.kill_timeout_s):
            log.error("container cgroup not empty", cgroup=rel)
        left = self.cgroups.remove(rel)
        if left:
            log.error("container cgroup not removed", dirs=",".join(left))

    async def _finish(self, p: _Pod, phase: PodPhase, reason: str, message: str) -> None:
        if p.finished:
            return
        p.finished = True
        p.stopping = True
        p.wake.set()
        for ctr in p.ctrs.values():
            await self._teardown(ctr.rel)
            if ctr.status.state == ContainerState.RUNNING:
                ctr.status = replace(ctr.status, state=ContainerState.TERMINATED, pid=None, finished_at=self.clock(),
                                     exit_code=ctr.status.exit_code if ctr.status.exit_code is not None else 137,
                                     reason="Error")
            if ctr.status.state == ContainerState.WAITING and reason == "StartError" and ctr.status.reason in (
                    "ContainerCreating", "PodInitializing") and message.startswith(f"container {ctr.spec.name}:"):
                ctr.status = replace(ctr.status, state=ContainerState.TERMINATED, reason="StartError",
                                     message=message, exit_code=128, finished_at=self.clock())
            elif ctr.status.state == ContainerState.WAITING:
                # a terminal pod runs nothing more: a container still being created (its
                # sibling failed first) or waiting out a back-off will never start
                ran = ctr.status.exit_code is not None
                ctr.status = replace(ctr.status, state=ContainerState.TERMINATED, finished_at=self.clock(),
                                     reason=("Completed" if ctr.status.exit_code == 0 else "Error") if ran
                                     else "NotStarted",
                                     message=ctr.status.message if ran else f"the pod ended ({reason}) before it started")
        ended = pod_end_time([c.status for c in p.ctrs.values() if c.spec.kind == "app"], self.clock())
        p.phase, p.reason, p.message, p.finished_at = phase, reason, message, ended
        log.info("pod finished", pod=p.pod.spec.key, uid=p.uid, phase=phase.value, reason=reason, message=message)
        await self._report(p)
        for ctr in p.ctrs.values():
            if ctr.bound:
                await self._unbind_left(p, ctr)
        # after the report: a crash in between leaves an orphan that restore() removes
        targets = [t for rec in p.record.containers.values() for t in rec.created]

        self.cgroups.remove_dir(_pod_rel(p))
        _remove_targets(targets)
        p.files.remove()
        self._pods.pop(p.uid, None)
        p.first.set()

    async def _remove_orphans(self, known: set[str]) -> None:
        """Runtime state and cgroups of pods admission no longer has: killed, removed.

        Only pods this runtime has state for (its root dir) are its orphans: a pod
        cgroup in the subtree without state here belongs to another hwagent sharing the
        subtree (another root dir) and is left alone, said once in the log."""
        uids: set[str] = set()
        with contextlib.suppress(OSError):
            uids |= {d.name for d in self.state_root.iterdir() if d.is_dir()}
        foreign = sorted(
            name[3:] for name in self.cgroups.pod_dirs()
            if name.startswith("pod") and name[3:] not in uids and name[3:] not in known
        )
        if foreign:
            log.warning(
                "foreign pod cgroups left", pods=",".join(foreign), state_root=self.state_root,
                note="no state for them",
            )
        for uid in sorted(uids - known):
            log.warning("orphan pod removed", uid=uid)
            try:
                pdir = pod_dir_name(uid)
            except PlanError:
                continue
            for rel in self.cgroups.container_paths(pdir):  # in whichever subtree: its class is not known
                await self._teardown(rel)
            self.cgroups.remove_pod_dir(pdir)
            PodFiles(self.state_root, uid).remove()

    # -- status -----------------------------------------------------------------------------
    def _status(self, p: _Pod) -> PodStatus:
        return PodStatus(phase=p.phase, reason=p.reason, message=p.message,
                         containers=tuple(p.ctrs[c.name].status for c in p.pod.spec.all_containers()),
                         started_at=p.started_at, finished_at=p.finished_at)

    async def _report(self, p: _Pod) -> None:
        async with p.report_lock:
            sink = self._sink()
            if sink is None:
                return
            try:
                await sink.pod_status_changed(p.uid, self._status(p))
            except Exception:  # noqa: BLE001 - the registry's trouble must not stop supervision
                log.exception("pod status report failed", pod=p.pod.spec.key)

    async def _save(self, p: _Pod) -> None:
        # inline: one small write and a rename, no fsync (see agent.runtime.state)
        if not p.finished:
            p.files.write(PodFiles.encode(p.record))


def _pod_rel(p: _Pod) -> str:
    """The pod's cgroup, in whichever subtree its containers' are (a pod has at least one)."""
    return os.path.dirname(next(iter(p.ctrs.values())).rel)


def _exit_message(info: ExitInfo, oom: bool, spec: ContainerSpec) -> str:
    if oom:
        limit = spec.resources.memory_limit_bytes
        return ("the kernel's OOM killer ended a process of the container"
                + (f" (memory limit {limit} bytes)" if limit else ""))
    return f"killed by signal {info.signal}" if info.signal else ""


def _create_targets(binds: Sequence[tuple[str, str, bool]]) -> list[str]:
    """Bind targets that do not exist on the host (a device node under another
    name, a plugin's mount point): created here, empty, so the shim can mount on
    them; returned so they can be removed when the pod ends. Parents created too
    are not tracked (left, as empty directories)."""
    made: list[str] = []
    for src, dst, _ro in binds:
        if os.path.lexists(dst):
            continue
        os.makedirs(os.path.dirname(dst) or "/", exist_ok=True)
        if os.path.isdir(src):
            os.mkdir(dst, 0o755)
        else:
            os.close(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        made.append(dst)
    return made


def _remove_targets(paths: Iterable[str]) -> None:
    for path in paths:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            elif os.path.isfile(path) and os.path.getsize(path) == 0:
                os.unlink(path)
        except OSError as e:
            log.warning("bind target not removed", path=path, error=e.strerror)

