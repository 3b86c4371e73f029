"""The Slurm job directory's state: one refresh walks, asks, reads and swaps (runs in an executor).

``SlurmJobSource`` is what the component publishes as ``POD_DIRECTORY`` (a
``PodDirectorySource``) and what the Slurm metrics and status read: the steps
found on this node, named by Slurm, with their last readings. Each refresh builds
new values and swaps them in whole, so a reader on another thread (the scrape)
sees one consistent picture.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.contracts.plugins import PluginState
from agent.contracts.poddirectory import PodDirectory
from agent.slurm.config import SlurmConfig
from agent.slurm.jobinfo import JobInfoCache
from agent.slurm.jobs import HeldDevice, SlurmStep, held_devices, join_steps, pod_directory
from agent.slurm.layout import StepCgroup, has_slurm_tree, walk_slurm_cgroups
from agent.slurm.preempt_policy import PreemptPolicy
from agent.slurm.readings import StepReader, StepReading, step_cpus

if TYPE_CHECKING:
    from agent.contracts import DaemonContext

__all__ = ["SlurmJobSource", "SlurmSnapshot", "WALKED_V1_CONTROLLERS"]

#: v1 controllers Slurm's plugins make their tree in (proctrack/cgroup: freezer; task/cgroup:
#: cpuset, memory, devices), in the order the walk tries them: either plugin alone is seen
WALKED_V1_CONTROLLERS = ("freezer", "cpuset", "memory", "devices")


@dataclass(frozen=True)
class SlurmSnapshot:
    steps: tuple[SlurmStep, ...] = ()
    readings: Mapping[str, StepReading] = field(default_factory=dict)
    directory: PodDirectory = field(default_factory=PodDirectory)
    at: float = 0.0
    #: job id -> the devices hwagent offers that it holds, with their health now
    held: Mapping[str, tuple[HeldDevice, ...]] = field(default_factory=dict)


class SlurmJobSource:
    def __init__(self, node: str, roots: Mapping[str, Path], parent: str, cache: JobInfoCache,
                 reader: StepReader, node_cpus: Any = None, slurmd: str = "",
                 policy: PreemptPolicy | None = None) -> None:
        """``roots``: controller (or "v2") -> its mount, the hierarchies walked for Slurm's tree
        (the steps' CPUs are read from its ``cpuset`` or ``v2`` one); ``slurmd``: the program
        asked for the node's GRES records ("" = devices not joined); ``policy``: which jobs are
        preemptible (``[slurm] preemptible_*``), the class every view shows."""
        self.policy = policy
        self.node = node
        self.slurmd = slurmd
        #: GRES name -> record files in index order (``slurmd -G``), asked when a job first needs it
        self.records: dict[str, list[tuple[str, ...]]] | None = None
        self._records_at = -1e18
        self.roots = dict(roots)
        self.parent = parent
        self.cache = cache
        self.reader = reader
        self.node_cpus = node_cpus
        self.snapshot = SlurmSnapshot()
        self.refreshes = 0

    @classmethod
    def for_daemon(cls, ctx: DaemonContext, cfg: SlurmConfig, node: str) -> SlurmJobSource:
        from agent.cgroups.mounts import cgroup_mounts
        from agent.daemonconfig import DAEMON_SECTION

        procfs = ctx.config[DAEMON_SECTION].procfs_root
        mounts = cgroup_mounts(procfs)
        roots = {k: mounts[k] for k in (*WALKED_V1_CONTROLLERS, "v2") if k in mounts}
        v1 = any(k in mounts for k in WALKED_V1_CONTROLLERS)
        tasks = (mounts.get("freezer") or mounts.get("cpuset")) if v1 else mounts.get("v2")
        memory = mounts.get("memory") if v1 else mounts.get("v2")
        from agent.slurm.preempt_policy import policy_from_config

        cache = JobInfoCache(cfg.bin_dir, cfg.slurm_conf, cfg.job_info_ttl_s, cfg.query_timeout_s, node=node)
        return cls(node, roots, cfg.cgroup_parent, cache, StepReader(tasks, memory, not v1, procfs),
                   ctx.topology.online, cfg.slurmd_path, policy_from_config(cfg))

    # -- the refresh (an executor thread; one at a time) ------------------------------
    def walk(self) -> list[StepCgroup]:
        """This node's step cgroups, from the first hierarchy (in ``roots``' order: freezer, where
        proctrack/cgroup tracks every step, then task/cgroup's) that holds its Slurm tree. One
        hierarchy, not their union: every plugin makes the same step directories, and each walk
        costs a listing per job and step (tests/unit/slurm/test_source.py)."""
        for mount in self.roots.values():
            if has_slurm_tree(mount, self.parent, self.node):
                return walk_slurm_cgroups(mount, self.parent, self.node)
        return []

    def gres_records(self, jobs: Mapping[str, Any]) -> dict[str, list[tuple[str, ...]]]:
        """slurmd's GRES records, asked once a job holds GRES, again (at most once per ttl) when a
        job names a GRES or index the records lack (gres.conf changed and slurmd restarted)."""
        wanted = {(name, i) for info in jobs.values() for name, idxs in info.held.items() for i in idxs}
        if not wanted:
            return self.records or {}
        have = self.records or {}
        missing = any(i >= len(have.get(name, ())) for name, i in wanted)
        now = time.monotonic()
        if (self.records is None or missing) and now - self._records_at > self.cache.ttl:
            self._records_at = now
            self.records = self.cache.gres_records(self.slurmd)
        return self.records or {}

    def refresh(self, device_states: Sequence[PluginState] = ()) -> SlurmSnapshot:
        """One refresh; ``device_states``: the devices hwagent offers (read on the loop by the caller)."""
        cgroups = self.walk()
        jobs = self.cache.lookup({c.job for c in cgroups})
        steps = join_steps(cgroups, jobs, self.policy)
        readings = self.reader.read([s.cgroup for s in steps])
        held = held_devices(jobs, self.gres_records(jobs), device_states) if device_states else {}
        v2 = self.reader.v2
        mount = self.roots.get("v2" if v2 else "cpuset")
        cpus = {s.cgroup: c for s in steps if (c := step_cpus(mount, s.cgroup, v2)) is not None}
        now = time.monotonic()
        source = f"slurm cgroups of node {self.node} and squeue"
        directory = pod_directory(steps, held, source=source, at=now, cpus=cpus)
        self.snapshot = SlurmSnapshot(steps, readings, directory, now, held)
        self.refreshes += 1
        return self.snapshot

    # -- PodDirectorySource ---------------------------------------------------------
    @property
    def current(self) -> PodDirectory:
        return self.snapshot.directory

    @property
    def last_error(self) -> str:
        return self.cache.last_error

    def containers_for_pressure(self) -> list[Any]:
        from agent.contracts.pressure import Container

        return [Container(pod_uid=c.pod_uid, container_name=c.container, qos_level=c.qos,
                          cpuset=c.cpus if c.cpus else self.node_cpus, cgroup_path=c.cgroup,
                          pod_namespace=c.namespace, pod_name=c.pod)
                for c in self.current.containers]
