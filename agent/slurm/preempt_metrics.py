"""Metrics of the Slurm preemption (agent.slurm.preempt): what it decided and the signal it decided on."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from agent.slurm.preempt_policy import Step

__all__ = ["ACTIONS", "SUPPRESSED", "LEVEL", "PREEMPTIBLE", "record"]

ACTIONS = Counter("hwagent_slurm_preempt_actions_total",
                  "Slurm preemption steps taken (suppress, requeue, cancel, restore)", ["action"])
SUPPRESSED = Gauge("hwagent_slurm_preempt_suppressed", "1 while this node's preemptible jobs are held to their quota")
LEVEL = Gauge("hwagent_slurm_preempt_protected_waiting",
              "Protected Slurm jobs' tasks waiting for a CPU, on average over the last interval")
PREEMPTIBLE = Gauge("hwagent_slurm_preempt_jobs", "Preemptible Slurm jobs on this node")


def record(step: Step, level: float | None, preemptible: int) -> None:
    if step.action not in ("hold", "idle"):
        ACTIONS.labels(step.action).inc()
    SUPPRESSED.set(1 if step.state.suppressed else 0)
    LEVEL.set(level or 0.0)
    PREEMPTIBLE.set(preemptible)
