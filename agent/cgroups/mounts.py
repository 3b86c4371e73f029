"""Where the cgroup hierarchies are mounted, from a process's mount table.

The one parser of the kernel's mount table in hwagent. Killing a cgroup
(agent.cgroups.kill) and reading one by id (agent.cgroups.hierarchy) need every
hierarchy a path may exist in: the v1 controllers and the v2 tree, wherever
the host mounted them; the topology reader needs the mount that holds its own
cpuset (agent.cgroups.own), in a live machine or a snapshot of one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.cgroups.detect import V1_CONTROLLERS
from agent.fsread import read_optional, rooted

__all__ = ["Mount", "parse_mounts", "read_mounts", "cgroup_mounts", "MOUNTS", "SELF_MOUNTS"]

#: the mount table as the kernel shows it at the procfs root (a snapshot has this one)
MOUNTS = "mounts"
#: the reading process's own mount namespace
SELF_MOUNTS = "self/mounts"


@dataclass(frozen=True)
class Mount:
    mountpoint: str
    fstype: str
    options: tuple[str, ...]

    @property
    def cpuset_capable(self) -> bool:
        """Whether cpusets can be read below it: the old cpuset fs, v1 with cpuset, or v2."""
        return self.fstype in ("cpuset", "cgroup2") or (self.fstype == "cgroup" and "cpuset" in self.options)


def parse_mounts(text: str) -> list[Mount]:
    """Lines of /proc/mounts (fstab format), malformed ones skipped."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            out.append(Mount(parts[1], parts[2], tuple(parts[3].split(","))))
    return out


def read_mounts(procfs_root: str | Path = "/proc", table: str = SELF_MOUNTS) -> list[Mount]:
    """The parsed mount table; empty when it cannot be read."""
    text = read_optional(rooted(procfs_root, table))
    return parse_mounts(text) if text is not None else []


def cgroup_mounts(procfs_root: str | Path = "/proc") -> dict[str, Path]:
    """controller name (or "v2") -> mount point, from /proc/self/mounts."""
    out: dict[str, Path] = {}
    for m in read_mounts(procfs_root):
        if m.fstype == "cgroup2":
            out.setdefault("v2", Path(m.mountpoint))
        elif m.fstype == "cgroup":
            for o in m.options:
                if o in V1_CONTROLLERS:
                    out.setdefault(o, Path(m.mountpoint))
    return out
