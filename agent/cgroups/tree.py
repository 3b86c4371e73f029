"""Walking a cgroup subtree and listing what runs in it.

Eviction (agent.cgroups.kill) needs every process of a subtree; the run-queue
fallback (agent.pressure.readers) every thread of one. Both walk the same way:
the cgroup directory and its descendants, never following a link out of the
mount, and a cgroup removed while walked is simply not there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["cgroup_dirs", "cgroup_procs", "cgroup_thread_ids", "join", "process_cgroup"]

#: v1 lists threads in "tasks", v2 in "cgroup.threads" (a v2 dir has no "tasks")
_THREAD_FILES = ("tasks", "cgroup.threads")


def cgroup_dirs(mount: str | Path, rel_path: str) -> list[Path]:
    """The cgroup dir and every descendant (a container's threads may sit below it);
    empty when it does not exist or resolves outside ``mount``."""
    top = Path(mount) / rel_path.lstrip("/")
    real_mount = os.path.realpath(mount).rstrip("/")
    real_top = os.path.realpath(top)
    if not top.is_dir() or not (real_top == real_mount or real_top.startswith(real_mount + "/")):
        return []
    return [Path(d) for d, _dirs, _files in os.walk(top, followlinks=False)]


def _ids(d: Path, name: str) -> list[int] | None:
    try:
        return [int(x) for x in (d / name).read_text().split()]
    except (OSError, ValueError):
        return None  # not this hierarchy's file, or removed while we looked


def cgroup_procs(dirs: Iterable[Path]) -> set[int]:
    """Process ids in ``cgroup.procs`` of each directory."""
    out: set[int] = set()
    for d in dirs:
        out.update(_ids(d, "cgroup.procs") or ())
    return out


def cgroup_thread_ids(mount: str | Path, rel_path: str) -> list[int]:
    """Thread ids in a cgroup subtree: v1 'tasks' lists threads, v2 'cgroup.threads'."""
    tids: list[int] = []
    for d in cgroup_dirs(mount, rel_path):
        for name in _THREAD_FILES:
            found = _ids(d, name)
            if found is not None:
                tids.extend(found)
                break
    return tids


def join(dirs: Iterable[str | Path], pid: int) -> None:
    """Move process ``pid`` into each cgroup directory (``hwagent exec``: a command joins a
    running container's cgroups). Raises the OSError of the first write that fails, with
    its file: PermissionError without root, FileNotFoundError when the cgroup is gone."""
    for d in dirs:
        with open(Path(d) / "cgroup.procs", "w") as f:
            f.write(str(pid))


def process_cgroup(pid: int, controller: str, procfs_root: str = "/proc") -> str | None:
    """``pid``'s cgroup in ``controller``'s v1 hierarchy ("" names v2's unified line), as
    ``/proc/<pid>/cgroup`` says it now: a mover checks a pid right before moving it, so a
    process that ended and a pid the kernel gave to someone else since are left alone.
    None when the process is gone or not in that hierarchy."""
    try:
        with open(os.path.join(procfs_root, str(pid), "cgroup")) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctls, path = line.split(":", 2)
        if (controller in ctls.split(",")) if controller else ctls == "":
            return path
    return None
