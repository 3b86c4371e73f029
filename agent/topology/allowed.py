"""The CPUs and memory nodes the reading process's own cgroup lets it use.

``/proc/self/status`` (``Cpus_allowed_list`` / ``Mems_allowed_list``) is the
kernel's own answer and is right for cgroup v1 and v2 alike, so it comes first.
It is the cpuset narrowed by any ``sched_setaffinity`` on the process: what the
agent can actually run on, which is the question being asked.
Snapshots and very old kernels lack it; then the cpuset the process sits in
(``/proc/self/cpuset``) is looked up in the cpuset or cgroup2 mount named by
``/proc/mounts`` (agent.cgroups.own, the cgroup layer), re-rooted under
``fs_root`` so that a snapshot of a whole machine (sys/, proc/, dev/cpuset/
side by side) reads the same way hwloc's ``HWLOC_FSROOT`` does.
"""

from __future__ import annotations

import os

from agent.cgroups.mounts import MOUNTS, parse_mounts
from agent.cgroups.own import OWN_CPUSET, own_cpuset_files
from agent.cpuset import CPUSet
from agent.fsread import rooted
from agent.topology.files import Notes

__all__ = ["read_allowed"]


def read_allowed(procfs_root: str, fs_root: str, notes: Notes) -> tuple[CPUSet | None, CPUSet | None]:
    """(allowed cpus, allowed memory nodes); None where it cannot be known."""
    status = notes.text(os.path.join(procfs_root, "self", "status"), stream=True)
    if status is not None:
        cpus = mems = None
        for line in status.splitlines():
            key, _, value = line.partition(":")
            if key == "Cpus_allowed_list":
                cpus = _parse(value, f"{procfs_root}/self/status Cpus_allowed_list", notes)
            elif key == "Mems_allowed_list":
                mems = _parse(value, f"{procfs_root}/self/status Mems_allowed_list", notes)
        if cpus is not None:
            return cpus, mems
    return _from_cgroup_fs(procfs_root, fs_root, notes)


def _parse(value: str, what: str, notes: Notes) -> CPUSet | None:
    try:
        return CPUSet.parse(value)
    except ValueError as e:
        notes.warn(f"{what}: {e}")
        return None


def _from_cgroup_fs(procfs_root: str, fs_root: str, notes: Notes) -> tuple[CPUSet | None, CPUSet | None]:
    cg = notes.text(rooted(procfs_root, OWN_CPUSET), stream=True)
    table = notes.text(rooted(procfs_root, MOUNTS), stream=True)
    if cg is None or table is None:
        return None, None
    files = own_cpuset_files(cg, parse_mounts(table), fs_root)
    if files is not None:
        return notes.cpuset(files[0]), notes.cpuset(files[1])
    if cg.strip().lstrip("/"):
        # the root cpuset restricts nothing, so not finding it loses nothing
        notes.warn(f"own cpuset {cg.strip()!r} not found in any cpuset/cgroup2 mount; allowed cpus unknown")
    return None, None
