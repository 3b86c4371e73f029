"""What the runtime says of a pod's processes when asked: its cgroups and the pids in them now.

Answers, not state: the runtime reads ``cgroup.procs`` when a view asks (``describe``),
so a pid shown is one the kernel listed at that moment, never a copy kept from a start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ContainerProcesses", "PodProcesses"]


@dataclass(frozen=True)
class ContainerProcesses:
    #: the container's cgroup, relative to each controller's root ("/hwagent.slice/pod<uid>/main")
    cgroup: str
    #: every process in it (and below), in any hierarchy, ascending; empty when nothing runs
    pids: tuple[int, ...] = ()


@dataclass(frozen=True)
class PodProcesses:
    #: the pod's cgroup, relative to each controller's root
    cgroup: str
    #: the pod's cgroup directories that exist now, one per hierarchy (hybrid: one per v1 controller and unified)
    cgroup_dirs: tuple[str, ...] = ()
    containers: dict[str, ContainerProcesses] = field(default_factory=dict)
