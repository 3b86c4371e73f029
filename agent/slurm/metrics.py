"""Prometheus families that name Slurm's steps: job, step, user, partition (issue 35 part 2).

The series are bounded as the pod series are: the ``max_step_series`` steps with the
most run-queue delay keep their own labels, the rest are summed in one series with
``job="other"`` (step, user and partition empty). Like the pod series they name who
runs what, so they are served only with ``[daemon] metrics_pod_labels`` on (the
endpoint asks for no credentials); without, the families are served empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from agent.slurm.jobs import HeldDevice, SlurmStep
from agent.slurm.readings import StepReading

__all__ = ["SlurmStepCollector", "bounded_steps", "OTHER"]

NS = "hwagent_slurm"
LABELS = ["job", "step", "user", "partition"]
OTHER = ("other", "", "", "")


def bounded_steps(steps: Sequence[SlurmStep], readings: Mapping[str, StepReading], cap: int
                  ) -> dict[tuple[str, str, str, str], list[StepReading]]:
    """labels -> the readings summed under them: the ``cap`` busiest steps (by run-queue delay,
    then job and step) by their own labels, every other one under ``OTHER``."""
    measured = [(s, readings[s.cgroup]) for s in steps if s.cgroup in readings]
    ranked = sorted(measured, key=lambda sr: (-sr[1].runqueue_delay_s, int(sr[0].job), sr[0].step))
    out: dict[tuple[str, str, str, str], list[StepReading]] = {}
    for i, (s, r) in enumerate(ranked):
        out.setdefault(s.labels if i < cap else OTHER, []).append(r)
    return out


class SlurmStepCollector:
    def __init__(self, snapshot: Callable[[], tuple[Sequence[SlurmStep], Mapping[str, StepReading],
                                                    Mapping[str, Sequence[HeldDevice]]]],
                 cap: int, *, labels_on: bool) -> None:
        self.snapshot = snapshot
        self.cap = cap
        self.labels_on = labels_on

    def describe(self) -> list:
        return []  # dynamic: the registry must not call collect() at registration

    def collect(self) -> Iterator:
        steps, readings, held = self.snapshot()
        count = GaugeMetricFamily(f"{NS}_steps", "Slurm job steps with a cgroup on this node")
        count.add_metric([], float(len(steps)))
        yield count
        rq = CounterMetricFamily(f"{NS}_step_runqueue_delay_seconds",
                                 "Time a Slurm step's threads waited runnable for a CPU (busiest steps; the rest "
                                 "summed in job=\"other\")", labels=LABELS)
        mem = GaugeMetricFamily(f"{NS}_step_memory_bytes", "Memory charged to a Slurm step's cgroup", labels=LABELS)
        psi = CounterMetricFamily(f"{NS}_step_cpu_pressure_some_seconds",
                                  "Time some of a Slurm step's threads stalled on CPU (cgroup v2 PSI)", labels=LABELS)
        threads = GaugeMetricFamily(f"{NS}_step_threads", "Threads in a Slurm step's cgroup", labels=LABELS)
        if self.labels_on:
            for labels, rs in sorted(bounded_steps(steps, readings, self.cap).items()):
                lv = list(labels)
                rq.add_metric(lv, sum(r.runqueue_delay_s for r in rs))
                threads.add_metric(lv, float(sum(r.threads for r in rs)))
                mems = [r.memory_bytes for r in rs if r.memory_bytes is not None]
                if mems:
                    mem.add_metric(lv, float(sum(mems)))
                ps = [r.cpu_pressure_some_s for r in rs if r.cpu_pressure_some_s is not None]
                if ps:
                    psi.add_metric(lv, sum(ps))
        yield from (rq, mem, psi, threads)
        dev = GaugeMetricFamily(f"{NS}_job_device_healthy",
                                "Health of a device hwagent offers that a Slurm job holds (1 healthy, 0 not), "
                                "by Slurm's GRES index", labels=["job", "user", "partition", "resource", "device_id"])
        if self.labels_on:
            named = {s.job: s for s in steps}
            for job, devices in sorted(held.items()):
                s = named.get(job)
                if s is None:
                    continue
                for d in devices:
                    dev.add_metric([job, s.user, s.partition, d.resource, d.device_id], 1.0 if d.healthy else 0.0)
        yield dev
