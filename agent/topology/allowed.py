"""The CPUs and memory nodes the reading process's own cgroup lets it use.

``/proc/self/status`` (``Cpus_allowed_list`` / ``Mems_allowed_list``) is the
kernel's own answer and is right for cgroup v1 and v2 alike, so it comes first.
It is the cpuset narrowed by any ``sched_setaffinity`` on the process: what the
agent can actually run on, which is the question being asked.
Snapshots and very old kernels lack it; then the cpuset the process sits in
(``/proc/self/cpuset``) is looked up in the cpuset or cgroup2 mount named by
``/proc/mounts``, re-rooted under ``fs_root`` so that a snapshot of a whole
machine (sys/, proc/, dev/cpuset/ side by side) reads the same way hwloc's
``HWLOC_FSROOT`` does.
"""

from __future__ import annotations

import os

from agent.cpuset import CPUSet
from agent.topology.files import Notes

__all__ = ["read_allowed"]

#: (cpus file, mems file) per kind of mount, tried in order. v2 only has the
#: effective set; v1 is read like hwloc does (the configured set, which may
#: name offline CPUs: users of ``Topology.allowed_cpus`` intersect with online).
_CGROUP_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "cgroup2": (("cpuset.cpus.effective", "cpuset.mems.effective"),),
    "cgroup": (("cpuset.cpus", "cpuset.mems"), ("cpus", "mems")),  # prefixed, noprefix
    "cpuset": (("cpus", "mems"), ("cpuset.cpus", "cpuset.mems")),  # the old cpuset filesystem
}


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
    cg = notes.text(os.path.join(procfs_root, "self", "cpuset"), stream=True)
    mounts = notes.text(os.path.join(procfs_root, "mounts"), stream=True)
    if cg is None or mounts is None:
        return None, None
    cg_path = cg.strip().lstrip("/")
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mountpoint, fstype, options = fields[1], fields[2], fields[3].split(",")
        if not (fstype in ("cpuset", "cgroup2") or (fstype == "cgroup" and "cpuset" in options)):
            continue
        base = os.path.join(fs_root, mountpoint.lstrip("/"), cg_path)
        for cpus_name, mems_name in _CGROUP_FILES[fstype]:
            cpus_file = os.path.join(base, cpus_name)
            if os.path.isfile(cpus_file):
                return notes.cpuset(cpus_file), notes.cpuset(os.path.join(base, mems_name))
    if cg_path:
        # the root cpuset restricts nothing, so not finding it loses nothing
        notes.warn(f"own cpuset {cg.strip()!r} not found in any cpuset/cgroup2 mount; allowed cpus unknown")
    return None, None
