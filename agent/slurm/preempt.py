"""Preemptible Slurm jobs as a daemon component: the reclaimed class, suppressed before Slurm requeues them.

Standalone mode with ``[slurm] enabled`` and a preemptible partition or QOS configured.
Every ``refresh_s`` it takes the Slurm jobs component's last snapshot (the steps on
this node, named by Slurm, with their run-queue delay; ``agent.slurm.source``), and in
an executor thread:

1. takes each job's class as the job directory decided it (``agent.slurm.jobs.join_steps``
   with ``preempt_policy.job_class``; the same class status and ``ps`` show): a preemptible job's cpu
   cgroup gets the reclaimed class (``agent.slurm.preempt_cgroup``: v1 low ``cpu.shares``
   in hwagent's own cpu cgroup, v2 ``cpu.idle``);
2. measures the run-queue wait of the protected jobs that share CPUs with a preemptible
   one (``preempt_policy.contending``: a job waiting on cores of its own is not pressure a
   preemptible job can relieve) and decides (``preempt_policy.decide``);
3. applies the decision: the preemptible jobs' CFS quota (split evenly, as the advisor
   splits it over reclaimed pods), and a hand-back through Slurm (``scontrol requeue``
   or ``scancel``, ``agent.slurm.preempt_slurm``). hwagent never signals a job's
   processes itself: Slurm ends, requeues or signals them, and its record says so.

Each decision that changes something is logged (``hwagent.slurm.preempt``) and counted
(``hwagent_slurm_preempt_actions_total``). A clean stop lifts the quotas it set; the
class stays (the jobs are still preemptible, and a restarted hwagent finds them so).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.contracts import POD_DIRECTORY, DaemonContext
from agent.eventlog import get_logger
from agent.slurm.config import SLURM_SECTION, SlurmConfig
from agent.slurm.preempt_policy import (
    RECLAIMED,
    PreemptibleJob,
    PreemptPolicy,
    PreemptState,
    Step,
    contending,
    decide,
    policy_from_config,
    waiting_level,
)
from agent.tasks import cancel_and_wait

log = get_logger("hwagent.slurm.preempt")

__all__ = ["PreemptComponent", "PreemptEngine", "factory", "JobView", "group_jobs"]


@dataclass(frozen=True)
class JobView:
    """One job on this node as the snapshot shows it."""

    job: str
    partition: str
    qos: str
    steps: tuple[str, ...]
    #: cumulative run-queue delay of its steps (seconds), per step cgroup
    delays: Mapping[str, float] = field(default_factory=dict)
    #: its class as the job directory decided it (``SlurmStep.klass``: one owner of the class)
    klass: str = ""


def group_jobs(steps: Any, readings: Mapping[str, Any]) -> list[JobView]:
    """The snapshot's steps as jobs (pure). A job Slurm has not named yet (no partition) is
    left out: no class is guessed."""
    by: dict[str, list[Any]] = {}
    for s in steps:
        by.setdefault(s.job, []).append(s)
    out = []
    for job, ss in sorted(by.items(), key=lambda kv: int(kv[0])):
        if not ss[0].partition:
            continue
        delays = {s.cgroup: readings[s.cgroup].runqueue_delay_s for s in ss if s.cgroup in readings}
        out.append(JobView(job, ss[0].partition, ss[0].qos, tuple(s.cgroup for s in ss), delays, ss[0].klass))
    return out


class PreemptEngine:
    """One interval's work (an executor thread; one at a time): class, measure, decide, apply."""

    def __init__(self, policy: PreemptPolicy, cgroups: Any, hand_back: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.cgroups = cgroups
        self.hand_back = hand_back
        self.clock = clock
        self.state = PreemptState()
        self.last: Step | None = None
        self.level: float | None = None
        #: job -> its cpu cgroup (for the quota), as the last interval found it
        self.knobs: dict[str, str] = {}
        #: job -> when this node first saw it preemptible (the youngest is handed back first)
        self.first_seen: dict[str, float] = {}
        self._delays: dict[str, float] = {}
        self._at: float | None = None
        #: hand-backs Slurm refused: job -> why (shown, not retried before retry_s)
        self.refused: dict[str, str] = {}
        self.handed_back: list[str] = []

    def tick(self, jobs: list[JobView], at: float) -> Step:
        from agent.advisor.suppress import PERIOD_US, plan_quotas
        from agent.cgroups.fs import CgroupVanished

        preemptible = [j for j in jobs if j.klass == RECLAIMED]
        protected = [j for j in jobs if j.klass != RECLAIMED]
        knobs: dict[str, str] = {}
        for j in preemptible:
            try:
                knobs[j.job] = self.cgroups.make_reclaimed(j.job, j.steps)
            except CgroupVanished:
                continue  # the job ended meanwhile
            except OSError as e:
                log.warning("cannot set a preemptible job class", job=j.job, error=str(e))
            self.first_seen.setdefault(j.job, at)
        self.first_seen = {k: v for k, v in self.first_seen.items() if k in knobs}
        # only the protected steps that share CPUs with a preemptible job: its wait is theirs to relieve
        theirs = [self.cgroups.step_cpus(s) for j in preemptible for s in j.steps]
        near = contending({k: self.cgroups.step_cpus(k) for j in protected for k in j.delays}, theirs)
        every = {k: v for j in protected for k, v in j.delays.items()}
        delays = {k: v for k, v in every.items() if k in near}
        self.level = None if self._at is None else waiting_level(self._delays, delays, at - self._at)
        # every protected step is remembered, so one that comes to share CPUs later counts from here
        self._delays, self._at = every, at
        step = decide(self.state, self.clock(), self.level,
                      [PreemptibleJob(k, self.first_seen[k]) for k in sorted(knobs)], self.policy)
        self.state = step.state
        plan = plan_quotas(sorted(set(knobs.values())), step.quota_cpus)
        for rel, quota in plan.items():
            try:
                self.cgroups.set_quota(rel, quota, PERIOD_US)
            except CgroupVanished:
                pass
            except (OSError, ValueError) as e:
                log.warning("cannot write a preemptible job cpu quota", cgroup=rel, error=str(e))
        for job in step.leave:
            try:
                self.hand_back(job)
            except OSError as e:
                self.refused[job] = str(e)
                log.warning("slurm refused to take a preemptible job back", job=job, action=self.policy.action,
                            error=str(e))
            else:
                self.handed_back.append(job)
        self.cgroups.remove_ended(set(knobs))
        self.knobs = knobs
        if step.action not in ("hold", "idle") or self.last is None or self.last.action != step.action:
            log.info("slurm preempt decision", action=step.action, why=step.why, jobs=",".join(step.leave),
                     preemptible=len(knobs), protected=len(protected))
        from agent.slurm import preempt_metrics as m

        m.record(step, self.level, len(knobs))
        self.last = step
        return step

    def release(self) -> None:
        """Every quota this engine set lifted (a clean stop: nobody would lift them)."""
        from agent.advisor.suppress import PERIOD_US
        from agent.cgroups.fs import CgroupVanished

        for rel in sorted(set(self.knobs.values())):
            try:
                self.cgroups.set_quota(rel, None, PERIOD_US)
            except (CgroupVanished, OSError, ValueError):
                pass


class PreemptComponent:
    name = "slurm-preempt"

    def __init__(self, cfg: SlurmConfig, policy: PreemptPolicy) -> None:
        self.cfg = cfg
        self.policy = policy
        self.engine: PreemptEngine | None = None
        self.source: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, ctx: DaemonContext) -> None:
        from agent.cgroups.config import CGROUPS_SECTION
        from agent.cgroups.detect import detect
        from agent.cgroups.fs import CgroupFS
        from agent.cgroups.mounts import cgroup_mounts
        from agent.daemonconfig import DAEMON_SECTION
        from agent.slurm.component import node_name
        from agent.slurm.preempt_cgroup import JobCpuCgroups
        from agent.slurm.preempt_slurm import HandBack
        from agent.slurm.source import SlurmJobSource

        source = ctx.lookup(POD_DIRECTORY)
        if not isinstance(source, SlurmJobSource):
            raise RuntimeError("slurm preemption needs the Slurm jobs component ([slurm] enabled, standalone mode)")
        self.source = source
        procfs = ctx.config[DAEMON_SECTION].procfs_root
        fs = CgroupFS(detect(ctx.config[CGROUPS_SECTION].root))
        node = node_name(self.cfg)
        cgroups = JobCpuCgroups(fs, cgroup_mounts(procfs), self.cfg.cgroup_parent, node, procfs)
        hand = HandBack(self.cfg.bin_dir, self.cfg.slurm_conf, self.policy.action, self.policy.cancel_signal,
                        self.cfg.query_timeout_s)
        self.engine = PreemptEngine(self.policy, cgroups, hand)
        log.info("slurm preemption on", node=node, partitions=",".join(sorted(self.policy.partitions)),
                 qos=",".join(sorted(self.policy.qos)), action=self.policy.action)
        self._task = asyncio.create_task(self._run(), name="slurm-preempt")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        seen = -1.0
        while True:
            snap = self.source.snapshot
            if snap.at != seen and self.engine is not None:
                seen = snap.at
                jobs = group_jobs(snap.steps, snap.readings)
                try:
                    await loop.run_in_executor(None, self.engine.tick, jobs, snap.at)
                except Exception:
                    log.exception("slurm preemption interval failed")
            await asyncio.sleep(min(1.0, self.cfg.refresh_s / 2))

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        if self.engine is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.engine.release)

    def healthy(self) -> bool:
        return self._task is not None and not self._task.done()

    def summary(self) -> str:
        """One line for status."""
        e = self.engine
        if e is None or e.last is None:
            return "no decision yet"
        lvl = "-" if e.level is None else f"{e.level:.2f}"
        return (f"{len(e.knobs)} preemptible jobs, {'suppressed' if e.state.suppressed else 'not suppressed'}, "
                f"protected tasks waiting {lvl} (threshold {self.policy.threshold:g}); last: {e.last.action}")


def factory(ctx: DaemonContext) -> PreemptComponent | None:
    cfg: SlurmConfig = ctx.config[SLURM_SECTION]
    policy = policy_from_config(cfg)
    if ctx.mode != "standalone" or not cfg.enabled or not policy.active:
        return None
    return PreemptComponent(cfg, policy)
