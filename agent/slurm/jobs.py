"""Slurm's steps joined with Slurm's answer about their jobs (pure).

A ``SlurmStep`` is what every signal names: job, step, user, partition (the last two
from Slurm, empty until Slurm answered: never guessed from the cgroup tree) and the
step's cgroup path. ``pod_directory`` says the same steps in the terms of the door
kubelet-mode pods use (``PodDirectory``): the partition in ``namespace``, the job in
``pod`` (``job_<id>``), the step in ``container``, so the pressure engine and status
take Slurm's steps as they take pods, through one contract.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agent.contracts.poddirectory import ContainerIdentity, PodDirectory
from agent.slurm.jobinfo import JobInfo
from agent.slurm.layout import StepCgroup

__all__ = ["SlurmStep", "join_steps", "pod_directory", "job_uid", "QOS_LEVEL"]

#: the QoS level Slurm's steps carry in hwagent's terms: shared (part 4 makes preemptible jobs reclaimed)
QOS_LEVEL = "shared"


@dataclass(frozen=True)
class SlurmStep:
    job: str
    step: str
    #: the job's user name and partition as Slurm answered ("" until it has)
    user: str
    partition: str
    #: the step's cgroup below the hierarchy's root
    cgroup: str
    uid: int | None = None
    tasks: tuple[int, ...] = ()
    account: str = ""
    qos: str = ""

    @property
    def labels(self) -> tuple[str, str, str, str]:
        """(job, step, user, partition): the metric labels."""
        return (self.job, self.step, self.user, self.partition)


def job_uid(job: str) -> str:
    """The pod uid a Slurm job takes in the pod directory (unique across the cluster)."""
    return f"slurm-job-{job}"


def join_steps(cgroups: Iterable[StepCgroup], jobs: Mapping[str, JobInfo]) -> tuple[SlurmStep, ...]:
    """One ``SlurmStep`` per step cgroup, named by Slurm's answer where it has one. A uid the
    cgroup tree names (v1) that Slurm contradicts is Slurm's: the tree's is kept only while
    Slurm has not answered."""
    out = []
    for c in cgroups:
        info = jobs.get(c.job)
        if info is None:
            out.append(SlurmStep(c.job, c.step, "", "", c.path, c.uid, c.tasks))
        else:
            out.append(SlurmStep(c.job, c.step, info.user, info.partition, c.path, info.uid, c.tasks,
                                 info.account, info.qos))
    return tuple(sorted(out, key=lambda s: (int(s.job), s.step, s.cgroup)))


def pod_directory(steps: Iterable[SlurmStep], *, source: str = "", at: float = 0.0) -> PodDirectory:
    containers = []
    pods: dict[str, tuple[str, str]] = {}
    for s in steps:
        uid = job_uid(s.job)
        pods[uid] = (s.partition, f"job_{s.job}")
        containers.append(ContainerIdentity(s.partition, f"job_{s.job}", f"step_{s.step}", uid, QOS_LEVEL, s.cgroup,
                                            owner_uid=s.uid))
    return PodDirectory(tuple(containers), {}, pods, source=source, at=at)
