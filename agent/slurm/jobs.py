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

from agent.contracts.plugins import PluginState
from agent.contracts.poddirectory import ContainerIdentity, DeviceHolder, PodDirectory
from agent.cpuset import CPUSet
from agent.slurm.gresmap import held_files
from agent.slurm.jobinfo import JobInfo
from agent.slurm.layout import StepCgroup
from agent.slurm.preempt_policy import RECLAIMED, PreemptPolicy, job_class

__all__ = ["HeldDevice", "SlurmStep", "held_devices", "join_steps", "pod_directory", "job_uid", "QOS_LEVEL", "qos_level"]

#: the QoS level a step of a protected job (or one Slurm has not named yet) carries in hwagent's terms
QOS_LEVEL = "shared"


def qos_level(klass: str) -> str:
    """The pod directory's QoS level of a step of class ``klass`` (pure): a preemptible job's is
    ``reclaimed``, as the advisor's reclaimed pods are; every other ``shared``."""
    return "reclaimed" if klass == RECLAIMED else QOS_LEVEL


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
    #: the job's class (``preempt_policy.RECLAIMED`` or ``PROTECTED``); "" until Slurm named the job
    klass: str = ""

    @property
    def labels(self) -> tuple[str, str, str, str]:
        """(job, step, user, partition): the metric labels."""
        return (self.job, self.step, self.user, self.partition)


@dataclass(frozen=True)
class HeldDevice:
    """A device hwagent offers that a Slurm job holds (by Slurm's GRES index), with its health."""

    resource: str
    device_id: str
    healthy: bool
    reason: str = ""


def held_devices(jobs: Mapping[str, JobInfo], records: Mapping[str, list[tuple[str, ...]]],
                 states: Iterable[PluginState]) -> dict[str, tuple[HeldDevice, ...]]:
    """job id -> the devices it holds on this node: its GRES indexes -> the records' files (slurmd's
    order) -> hwagent's devices with those nodes. A file hwagent does not offer names nothing."""
    by_file: dict[str, HeldDevice] = {}
    for st in states:
        for d in st.devices:
            for path in d.nodes:
                by_file[path] = HeldDevice(st.resource, d.id, d.healthy, d.reason)
    out: dict[str, tuple[HeldDevice, ...]] = {}
    for job, info in jobs.items():
        found: dict[tuple[str, str], HeldDevice] = {}
        for path in held_files(info.held, records):
            dev = by_file.get(path)
            if dev is not None:
                found.setdefault((dev.resource, dev.device_id), dev)
        if found:
            out[job] = tuple(found[k] for k in sorted(found))
    return out


def job_uid(job: str) -> str:
    """The pod uid a Slurm job takes in the pod directory (unique across the cluster)."""
    return f"slurm-job-{job}"


def join_steps(cgroups: Iterable[StepCgroup], jobs: Mapping[str, JobInfo],
               policy: PreemptPolicy | None = None) -> tuple[SlurmStep, ...]:
    """One ``SlurmStep`` per step cgroup, named by Slurm's answer where it has one. A uid the
    cgroup tree names (v1) that Slurm contradicts is Slurm's: the tree's is kept only while
    Slurm has not answered. A named job's class is ``job_class`` under ``policy`` (none: no
    job is preemptible); an unnamed one has none (no class is guessed)."""
    policy = policy if policy is not None else PreemptPolicy()
    out = []
    for c in cgroups:
        info = jobs.get(c.job)
        if info is None:
            out.append(SlurmStep(c.job, c.step, "", "", c.path, c.uid, c.tasks))
        else:
            out.append(SlurmStep(c.job, c.step, info.user, info.partition, c.path, info.uid, c.tasks,
                                 info.account, info.qos, job_class(info.partition, info.qos, policy)))
    return tuple(sorted(out, key=lambda s: (int(s.job), s.step, s.cgroup)))


def pod_directory(steps: Iterable[SlurmStep], held: Mapping[str, tuple[HeldDevice, ...]] | None = None, *,
                  source: str = "", at: float = 0.0, cpus: Mapping[str, CPUSet] | None = None) -> PodDirectory:
    """The steps as the pod directory's containers, each with its class's QoS level and its CPUs
    (``cpus``: step cgroup -> its cpuset, where one was read); the devices a job holds held by the
    job (its pod; no one step: Slurm gives devices to the job)."""
    containers = []
    pods: dict[str, tuple[str, str]] = {}
    devices: dict[tuple[str, str], DeviceHolder] = {}
    for s in steps:
        uid = job_uid(s.job)
        pods[uid] = (s.partition, f"job_{s.job}")
        containers.append(ContainerIdentity(s.partition, f"job_{s.job}", f"step_{s.step}", uid, qos_level(s.klass),
                                            s.cgroup, (cpus or {}).get(s.cgroup), owner_uid=s.uid))
        for d in (held or {}).get(s.job, ()):
            devices[(d.resource, d.device_id)] = DeviceHolder(s.partition, f"job_{s.job}", "")
    return PodDirectory(tuple(containers), devices, pods, source=source, at=at)
