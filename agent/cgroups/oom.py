"""How many processes the kernel's OOM killer ended in a cgroup (pure parser, a reader over a read callable).

A container killed for memory exits like one killed by ``kill -9`` (status 137),
or, when the killer picked a child, with whatever its parent made of that. The
kubelet tells them apart by the memory cgroup's own count, and so do we: cgroup
v2 ``memory.events`` and, on v1 with a recent kernel (4.13+), ``memory.oom_control``
both carry an ``oom_kill N`` line. The runtime reads it while the container's
cgroup still exists (before teardown); each run of a container has a fresh cgroup,
so the count is that run's.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["OOM_FILES", "parse_oom_kill", "oom_kills"]

#: v2 first: on a hybrid machine a memory controller lives in one of them
OOM_FILES = ("memory.events", "memory.oom_control")


def parse_oom_kill(text: str | None) -> int | None:
    """The ``oom_kill`` count of a ``memory.events`` or ``memory.oom_control`` text; None without one."""
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def oom_kills(read: Callable[[str, str], str | None], rel: str) -> int:
    """OOM kills in cgroup ``rel``; ``read(rel, file)`` returns a control file's text or None
    (``WorkloadCgroups.read``). 0 when no memory controller accounts for it."""
    for name in OOM_FILES:
        n = parse_oom_kill(read(rel, name))
        if n is not None:
            return n
    return 0
