"""Which files hold the cpuset a process sits in, under a live or snapshot root.

The topology reader asks this when ``/proc/self/status`` cannot answer (snapshots,
very old kernels): the cpuset path from ``/proc/self/cpuset`` is looked up in
each mount that can hold cpusets, re-rooted under ``fs_root`` so a snapshot of a
whole machine (sys/, proc/, dev/cpuset/ side by side) reads the same way hwloc's
``HWLOC_FSROOT`` does. Reading and judging the files stays with the caller.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from agent.cgroups.mounts import Mount
from agent.fsread import rooted

__all__ = ["OWN_CPUSET", "own_cpuset_files"]

#: below the procfs root: the cpuset path of the reading process
OWN_CPUSET = "self/cpuset"

#: (cpus file, mems file) per kind of mount, tried in order. v2 only has the
#: effective set; v1 is read like hwloc does (the configured set, which may
#: name offline CPUs: users of ``Topology.allowed_cpus`` intersect with online).
_CPUSET_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "cgroup2": (("cpuset.cpus.effective", "cpuset.mems.effective"),),
    "cgroup": (("cpuset.cpus", "cpuset.mems"), ("cpus", "mems")),  # prefixed, noprefix
    "cpuset": (("cpus", "mems"), ("cpuset.cpus", "cpuset.mems")),  # the old cpuset filesystem
}


def own_cpuset_files(
    cpuset_path: str, mounts: Iterable[Mount], fs_root: str, isfile: Callable[[str], bool] = os.path.isfile
) -> tuple[str, str] | None:
    """(cpus file, mems file) of the cpuset ``cpuset_path`` in the first mount that has it."""
    rel = cpuset_path.strip().lstrip("/")
    for m in mounts:
        if not m.cpuset_capable:
            continue
        base = rooted(fs_root, m.mountpoint, rel)
        for cpus_name, mems_name in _CPUSET_FILES[m.fstype]:
            cpus_file = os.path.join(base, cpus_name)
            if isfile(cpus_file):
                return cpus_file, os.path.join(base, mems_name)
    return None
