"""Preemptible Slurm jobs: which jobs are hwagent's reclaimed class, and what pressure does to them (pure).

A job of a configured partition or QOS is *preemptible*: hwagent's ``reclaimed`` class.
Every other job on the node is *protected*: its tasks' run-queue wait, where it shares CPUs
with a preemptible job (``contending``), is the pressure signal (``waiting_level``: how many of the protected tasks, on average over an interval,
were ready to run but waited for a CPU: the growth of their steps' run-queue delay, which
the Slurm jobs component reads from the threads' ``schedstat``).

The response is graduated, in this order, as the advisor's suppress-before-evict is:

1. always: the class itself (low ``cpu.shares`` on v1, ``cpu.idle`` on v2; the adapter's job);
2. pressure held for ``suppress_after_s``: the preemptible jobs' CFS quota is cut to
   ``quota_cpus`` together (**suppress**);
3. pressure still there ``requeue_after_s`` after the cut, never interrupted by calm: one job
   (the youngest: the least work lost) is handed back to Slurm (**requeue** or **cancel**, as
   configured); another only after another ``requeue_after_s`` of pressure;
4. calm held for ``relax_after_s``: the quota is lifted (**restore**).

Between ``threshold * calm_fraction`` and ``threshold`` the level is neither pressure nor
calm: no clock starts or stops there, so a signal hovering at the threshold does not flap.
Nothing here reads a file or runs a program: the component feeds it readings and carries
out its ``Step``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agent.cpuset import CPUSet

if TYPE_CHECKING:
    from agent.slurm.config import SlurmConfig

__all__ = [
    "RECLAIMED",
    "PROTECTED",
    "ACTIONS",
    "PreemptPolicy",
    "PreemptibleJob",
    "PreemptState",
    "Step",
    "job_class",
    "waiting_level",
    "contending",
    "decide",
    "policy_from_config",
]

#: hwagent's class names for a Slurm job
RECLAIMED = "reclaimed"
PROTECTED = "protected"
#: how a job is handed back to Slurm
ACTIONS = ("requeue", "cancel")
#: a signal as scancel --signal takes it: a name (USR1, SIGTERM) or a number
_SIGNAL = re.compile(r"^(SIG)?[A-Z][A-Z0-9+]{0,11}$|^[0-9]{1,2}$")


@dataclass(frozen=True)
class PreemptPolicy:
    """What makes a job preemptible and how hard hwagent leans on it (``[slurm] preempt_*``)."""

    partitions: frozenset[str] = frozenset()
    qos: frozenset[str] = frozenset()
    #: protected tasks waiting for a CPU, on average over an interval, that count as pressure
    threshold: float = 0.5
    #: below ``threshold * calm_fraction`` the node is calm
    calm_fraction: float = 0.5
    suppress_after_s: float = 5.0
    requeue_after_s: float = 30.0
    relax_after_s: float = 30.0
    #: the CFS quota all preemptible jobs share while suppressed (CPUs)
    quota_cpus: float = 0.1
    action: str = "requeue"
    #: a job asked to leave that still runs this long after is asked again
    retry_s: float = 60.0
    #: with "cancel": the signal ``scancel --signal`` sends; "" = Slurm's own cancel
    cancel_signal: str = ""

    def validate(self) -> None:
        if self.threshold <= 0:
            raise ValueError("preempt_threshold must be > 0")
        if not 0 < self.calm_fraction < 1:
            raise ValueError("preempt_calm_fraction must be in (0, 1)")
        for key in ("suppress_after_s", "requeue_after_s", "relax_after_s", "retry_s"):
            if getattr(self, key) < 0:
                raise ValueError(f"preempt_{key} must be >= 0")
        if self.quota_cpus < 0.01:
            raise ValueError("preempt_quota_cpus must be >= 0.01 (the kernel's 1 ms per 100 ms period)")
        if self.action not in ACTIONS:
            raise ValueError(f"preempt_action must be one of {', '.join(ACTIONS)}, not {self.action!r}")
        if self.cancel_signal and not _SIGNAL.match(self.cancel_signal):
            raise ValueError(f"preempt_cancel_signal must be a signal name or number, not {self.cancel_signal!r}")
        if self.cancel_signal and self.action != "cancel":
            raise ValueError("preempt_cancel_signal is for preempt_action = \"cancel\"")
        for name in (*self.partitions, *self.qos):
            if not name or "," in name or any(c.isspace() for c in name):
                raise ValueError(f"a preemptible partition or QOS must be one word, not {name!r}")

    @property
    def active(self) -> bool:
        """Whether any job can be preemptible at all."""
        return bool(self.partitions or self.qos)


def job_class(partition: str, qos: str, policy: PreemptPolicy) -> str:
    """RECLAIMED for a job of a preemptible partition or QOS, else PROTECTED. A running job
    has one partition; a pending one may list several (``a,b``): any preemptible one counts."""
    parts = {p for p in partition.split(",") if p}
    if parts & policy.partitions or (qos and qos in policy.qos):
        return RECLAIMED
    return PROTECTED


def waiting_level(before: Mapping[str, float], after: Mapping[str, float], seconds: float) -> float | None:
    """Protected tasks waiting for a CPU, on average over ``seconds``: the growth of their
    steps' cumulative run-queue delay (seconds, per step cgroup) divided by the wall time.
    Only steps in both readings count: a step seen first in ``after`` starts counting there
    (its counter may hold waits from long before: a job Slurm has only just named, a step
    that has only now come to share CPUs with a preemptible job); a step gone adds nothing;
    a counter that went back (a step cgroup made again) adds nothing. None when there is
    nothing to measure (no interval, no protected step)."""
    if seconds <= 0 or not after:
        return None
    grown = 0.0
    for key, delay in after.items():
        prev = before.get(key)
        if prev is not None and delay > prev:
            grown += delay - prev
    return grown / seconds


def contending(protected: Mapping[str, CPUSet | None], preemptible: Sequence[CPUSet | None]) -> set[str]:
    """The protected steps a preemptible job can make wait: those that share a CPU with one.
    CPUs not known (no cpuset cgroup: task/cgroup off) are every CPU. A protected step on cores
    of its own waits only for itself (more threads than its cores): suppressing or requeueing
    someone else's job cannot help it, so its wait is not pressure here."""
    if not preemptible:
        return set()
    if any(c is None for c in preemptible):
        return set(protected)
    theirs = CPUSet.union_all(c for c in preemptible if c is not None)
    return {k for k, cpus in protected.items() if cpus is None or cpus & theirs}


@dataclass(frozen=True)
class PreemptibleJob:
    job_id: str
    #: when Slurm started it (epoch seconds): the youngest is handed back first
    start: float


@dataclass(frozen=True)
class PreemptState:
    """What the decision remembers between intervals (the component keeps one)."""

    suppressed: bool = False
    pressured_since: float | None = None
    calm_since: float | None = None
    #: while suppressed and pressured: when the next job is handed back if pressure persists
    escalate_at: float | None = None
    #: job id -> when it was asked to leave (kept while the job still runs here)
    asked: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One interval's decision."""

    state: PreemptState
    #: the preemptible jobs' shared CFS quota (CPUs); None: no quota of hwagent's
    quota_cpus: float | None
    #: jobs to hand back to Slurm now (with ``policy.action``)
    leave: tuple[str, ...]
    #: "idle", "hold", "suppress", "requeue", "cancel", "restore"
    action: str
    why: str


def _pick(jobs: Sequence[PreemptibleJob], asked: Mapping[str, float], now: float, retry_s: float) -> str | None:
    """The youngest job not asked to leave within ``retry_s`` (ties: the larger id, the later submitted)."""
    free = [j for j in jobs if j.job_id not in asked or now - asked[j.job_id] >= retry_s]
    if not free:
        return None
    return max(free, key=lambda j: (j.start, _id_key(j.job_id))).job_id


def _id_key(job_id: str) -> tuple[int, str]:
    head = job_id.split("_", 1)[0]
    return (int(head), job_id) if head.isdigit() else (-1, job_id)


def decide(state: PreemptState, now: float, level: float | None, jobs: Sequence[PreemptibleJob],
           policy: PreemptPolicy) -> Step:
    """The next step from the pressure ``level`` (``waiting_level``; None: no protected task to
    measure, which is calm: there is nothing to protect) and the preemptible ``jobs`` running here."""
    running = {j.job_id for j in jobs}
    asked = {k: v for k, v in state.asked.items() if k in running}
    if not jobs:
        return Step(PreemptState(), None, (), "idle", "no preemptible job on this node")
    pressured = level is not None and level >= policy.threshold
    calm = level is None or level < policy.threshold * policy.calm_fraction
    pressured_since = (state.pressured_since if state.pressured_since is not None else now) if pressured else (
        None if calm else state.pressured_since)
    calm_since = (state.calm_since if state.calm_since is not None else now) if calm else (
        None if pressured else state.calm_since)
    st = replace(state, pressured_since=pressured_since, calm_since=calm_since, asked=asked)
    shown = "no protected task" if level is None else f"{level:.2f} protected tasks waiting"

    if not st.suppressed:
        if pressured and pressured_since is not None and now - pressured_since >= policy.suppress_after_s:
            st = replace(st, suppressed=True, escalate_at=now + policy.requeue_after_s)
            return Step(st, policy.quota_cpus, (), "suppress",
                        f"{shown} for {now - pressured_since:.0f}s (>= {policy.threshold:g}): "
                        f"preemptible jobs held to {policy.quota_cpus:g} CPUs")
        return Step(st, None, (), "hold", shown)

    if calm and calm_since is not None and now - calm_since >= policy.relax_after_s:
        st = replace(st, suppressed=False, escalate_at=None)
        return Step(st, None, (), "restore", f"{shown}, calm for {now - calm_since:.0f}s: quota lifted")
    if calm:
        return Step(replace(st, escalate_at=None), policy.quota_cpus, (), "hold", f"suppressed, {shown}")
    if not pressured:
        return Step(st, policy.quota_cpus, (), "hold", f"suppressed, {shown}")
    escalate_at = st.escalate_at if st.escalate_at is not None else now + policy.requeue_after_s
    if now < escalate_at:
        return Step(replace(st, escalate_at=escalate_at), policy.quota_cpus, (), "hold",
                    f"suppressed, {shown}; hand-back in {escalate_at - now:.0f}s if it persists")
    victim = _pick(jobs, asked, now, policy.retry_s)
    if victim is None:
        return Step(replace(st, escalate_at=escalate_at), policy.quota_cpus, (), "hold",
                    f"suppressed, {shown}; every preemptible job already asked to leave")
    st = replace(st, escalate_at=now + policy.requeue_after_s, asked={**asked, victim: now})
    return Step(st, policy.quota_cpus, (victim,), policy.action,
                f"{shown} persisted {policy.requeue_after_s:g}s after suppression: {policy.action} job {victim}")


def policy_from_config(cfg: SlurmConfig) -> PreemptPolicy:
    """The ``[slurm] preemptible_*`` / ``preempt_*`` keys as a policy."""
    return PreemptPolicy(
        partitions=frozenset(cfg.preemptible_partitions), qos=frozenset(cfg.preemptible_qos),
        threshold=cfg.preempt_threshold, calm_fraction=cfg.preempt_calm_fraction,
        suppress_after_s=cfg.preempt_suppress_after_s, requeue_after_s=cfg.preempt_requeue_after_s,
        relax_after_s=cfg.preempt_relax_after_s, quota_cpus=cfg.preempt_quota_cpus, action=cfg.preempt_action,
        retry_s=cfg.preempt_retry_s, cancel_signal=cfg.preempt_cancel_signal)
