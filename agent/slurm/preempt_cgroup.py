"""Where a preemptible Slurm job's CPU knobs are, and the writes hwagent makes there (thin I/O).

One writer per file: Slurm 22.05's cgroup plugins write ``cpuset.cpus``/``cpuset.mems``,
the memory limits (``memory.limit_in_bytes``, ``memory.soft_limit_in_bytes``,
``memory.memsw.limit_in_bytes``, ``memory.swappiness``, ``memory.oom_control``; v2
``memory.max``/``memory.high``/``memory.swap.max``), ``devices.allow``/``deny`` (v2: an eBPF
program), ``freezer.state``/``cgroup.freeze`` and ``cgroup.subtree_control``; on v1 they
never use the ``cpu`` controller, on v2 they never write ``cpu.*``. hwagent writes only
``cpu.shares`` (v1) / ``cpu.idle`` (v2) and the CFS quota (``cpu.cfs_quota_us`` /
``cpu.max``), nothing else of a job's.

- **v2**: the job's own cgroup (``.../slurmstepd.scope/job_<j>``, Slurm's) gets
  ``cpu.idle = 1`` and, while suppressed, its ``cpu.max``.
- **v1**: Slurm makes no cgroup in the ``cpu`` hierarchy, so the job's processes sit where
  slurmd's do there. hwagent makes ``<parent>/hwagent_slurm_<node>/job_<j>`` in the cpu
  hierarchy (its own subtree: nobody else writes there), gives the subtree and the job
  low ``cpu.shares`` (2, the kernel's least), and moves the job's processes in, read from
  Slurm's own job cgroup (proctrack/task cgroup: freezer, cpuset or memory) every
  interval, so a new step's processes follow. ``slurmstepd`` stays where it is: Slurm's
  daemon is not throttled. Where ``cpu`` is mounted with a controller Slurm uses
  (``cpu,cpuacct`` and jobacct_gather/cgroup), Slurm's job cgroup is there already and is
  used as on v2 (no move).

The quota is hwagent's alone on these cgroups, so "not suppressed" is "no quota" (``max``,
``-1``): after a crash the next interval lifts a quota nobody needs, with no memory of
what was there before.
"""

from __future__ import annotations

import errno
import os
import posixpath
from collections.abc import Iterable, Mapping
from pathlib import Path

from agent.cgroups.fs import CgroupFS, CgroupVanished
from agent.cgroups.tree import cgroup_dirs, cgroup_procs, join, process_cgroup
from agent.cpuset import CPUSet
from agent.eventlog import get_logger

__all__ = ["JobCpuCgroups", "LOW_SHARES", "own_subtree", "job_dir_of"]

log = get_logger("hwagent.slurm.preempt")

#: the least weight v1's cpu.shares takes
LOW_SHARES = 2
#: Slurm's controllers on v1 whose job cgroup lists the job's processes, in the order asked
_PROCS_CONTROLLERS = ("freezer", "cpuset", "memory", "devices")


def own_subtree(parent: str, node: str) -> str:
    """hwagent's v1 cpu subtree for this node's preemptible jobs (below the cpu hierarchy's root)."""
    base = parent.strip("/")
    return "/" + "/".join(p for p in (base, f"hwagent_slurm_{node}") if p)


def job_dir_of(step_cgroup: str) -> str:
    """A step's job cgroup (``.../job_<j>/step_<s>`` -> ``.../job_<j>``)."""
    return posixpath.dirname(step_cgroup.rstrip("/"))


class JobCpuCgroups:
    """The cpu-hierarchy side of preemptible jobs on one node."""

    def __init__(self, fs: CgroupFS, mounts: Mapping[str, Path], parent: str, node: str,
                 procfs_root: str = "/proc") -> None:
        self.fs = fs
        self.v2 = fs.cpu_v2
        self.cpu_root = fs.cpu_root
        self.subtree = own_subtree(parent, node)
        self.procfs_root = procfs_root
        #: v1: (controller, mount) where Slurm's job cgroups list the job's processes
        self.procs_mounts = [(c, mounts[c]) for c in _PROCS_CONTROLLERS if c in mounts and not self.v2]

    # -- where ---------------------------------------------------------------------
    def _dir(self, rel: str) -> Path:
        return self.cpu_root / rel.lstrip("/")

    def knob_dir(self, job: str, step_cgroups: Iterable[str]) -> tuple[str, bool]:
        """(the job's cgroup in the cpu hierarchy, whether it is hwagent's own)."""
        for sc in step_cgroups:
            rel = job_dir_of(sc)
            if self.v2 or self._dir(rel).is_dir():
                return rel, False
        return f"{self.subtree}/job_{job}", True

    # -- the class -------------------------------------------------------------------
    def make_reclaimed(self, job: str, step_cgroups: Iterable[str]) -> str:
        """The job's cpu cgroup set to the reclaimed class (and, on v1, its processes moved in);
        returns it. Raises CgroupVanished when Slurm's cgroup went away meanwhile."""
        steps = list(step_cgroups)
        rel, own = self.knob_dir(job, steps)
        if self.v2:
            self.fs.write_cpu_idle(rel, 1)
            return rel
        if own:
            self._ensure_dir(self.subtree)
            self._write_shares(self.subtree, LOW_SHARES)
            self._ensure_dir(rel)
            self._move_in(rel, steps)
        self._write_shares(rel, LOW_SHARES)
        return rel

    def _ensure_dir(self, rel: str) -> None:
        d = self._dir(rel)
        if not d.is_dir():
            # parents too: the configured parent need not exist in the cpu hierarchy (Slurm makes none there)
            d.mkdir(parents=True, exist_ok=True)

    def _write_shares(self, rel: str, value: int) -> None:
        self.fs.write_cpu_shares(rel, value)

    def _move_in(self, rel: str, step_cgroups: list[str]) -> None:
        """Every process of Slurm's job cgroup (but slurmstepd) into ``rel``: new ones each interval.
        A pid is checked to be in the job's cgroup right before it is moved (``_belongs``): a process
        of the job that ended and a pid the kernel handed to someone else since are not moved."""
        want: set[int] = set()
        controller = ""
        for ctl, mount in self.procs_mounts:
            for sc in step_cgroups:
                want |= cgroup_procs(cgroup_dirs(mount, job_dir_of(sc)))
            if want:
                controller = ctl
                break
        here = set(cgroup_procs([self._dir(rel)]))
        job_dirs = {job_dir_of(sc) for sc in step_cgroups}
        for pid in sorted(want - here):
            if not self._belongs(pid, controller, job_dirs):
                continue
            try:
                join([self._dir(rel)], pid)
            except OSError as e:
                if e.errno != errno.ESRCH:  # ended meanwhile: nothing to move
                    log.warning("cannot move a slurm job process into its cpu cgroup", pid=pid, cgroup=rel,
                                error=e.strerror)

    def _belongs(self, pid: int, controller: str, job_dirs: set[str]) -> bool:
        """Whether ``pid`` is, now, a process of the job (in its cgroup of ``controller``) other
        than slurmstepd (Slurm's own daemon is never throttled)."""
        try:
            with open(os.path.join(self.procfs_root, str(pid), "comm")) as f:
                if f.read().strip() == "slurmstepd":
                    return False
        except OSError:
            return False  # gone: nothing to move
        path = process_cgroup(pid, controller, self.procfs_root)
        return path is not None and any(path == d or path.startswith(d + "/") for d in job_dirs)

    def step_cpus(self, step_cgroup: str) -> CPUSet | None:
        """The CPUs a step may run on (its cpuset, as task/cgroup set it); None when unknown (no
        cpuset cgroup for it: task/cgroup off, or the step ended)."""
        try:
            cpus = self.fs.read_effective_cpus(step_cgroup)
        except (CgroupVanished, OSError, ValueError):
            return None
        return cpus or None

    # -- the quota -------------------------------------------------------------------
    def set_quota(self, rel: str, quota_us: int | None, period_us: int) -> bool:
        """The job's CFS quota (None: none). Whether it changed."""
        return self.fs.write_cpu_quota(rel, quota_us, period_us if quota_us is not None else None)

    def read_quota(self, rel: str) -> tuple[int | None, int]:
        return self.fs.read_cpu_quota(rel)

    def read_class(self, rel: str) -> int | None:
        """``cpu.idle`` (v2) or ``cpu.shares`` (v1) of the job's cgroup."""
        try:
            return self.fs.read_cpu_idle(rel) if self.v2 else self.fs.read_cpu_shares(rel)
        except (CgroupVanished, OSError, ValueError):
            return None

    # -- cleanup ---------------------------------------------------------------------
    def remove_ended(self, running: set[str]) -> list[str]:
        """v1: hwagent's job cgroups of jobs no longer running here, once empty (a process
        still inside keeps its cgroup until a later interval)."""
        if self.v2:
            return []
        base = self._dir(self.subtree)
        removed = []
        try:
            names = [e.name for e in os.scandir(base) if e.is_dir(follow_symlinks=False)]
        except FileNotFoundError:
            return []
        for name in names:
            if not name.startswith("job_") or name[4:] in running:
                continue
            try:
                os.rmdir(base / name)
                removed.append(name)
            except OSError as e:
                if e.errno not in (errno.EBUSY, errno.ENOENT):
                    log.warning("cannot remove an ended job cpu cgroup", cgroup=str(base / name),
                                error=e.strerror)
        return removed
