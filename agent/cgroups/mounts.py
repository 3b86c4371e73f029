"""Where the cgroup hierarchies are mounted, from a process's mount table.

Killing a cgroup (agent.cgroups.kill) and reading one by id (agent.pressure)
both need every hierarchy a path may exist in: the v1 controllers and the v2
tree, wherever the host mounted them.
"""

from __future__ import annotations

from pathlib import Path

from agent.cgroups.detect import V1_CONTROLLERS

__all__ = ["cgroup_mounts"]


def cgroup_mounts(procfs_root: str = "/proc") -> dict[str, Path]:
    """controller name (or "v2") -> mount point, from /proc/self/mounts."""
    out: dict[str, Path] = {}
    try:
        text = (Path(procfs_root) / "self" / "mounts").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        fstype, mnt, opts = parts[2], parts[1], parts[3].split(",")
        if fstype == "cgroup2":
            out.setdefault("v2", Path(mnt))
        elif fstype == "cgroup":
            for o in opts:
                if o in V1_CONTROLLERS:
                    out.setdefault(o, Path(mnt))
    return out
