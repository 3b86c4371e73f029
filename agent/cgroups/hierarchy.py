"""Which hierarchy pods' CPU cgroups are keyed on, and cgroup id -> path.

A cgroup's id (kernfs node id) is the inode number of its directory on both v1
and v2, so a walk of the hierarchy with stat() maps the ids the run-queue probe
reports to paths. Paths are given relative to the hierarchy's mount, "/"-rooted,
like /proc/<pid>/cgroup shows them, so they compare across v1 controllers and v2.
The pressure engine and the kubelet's pod directory share this one choice.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from agent.cgroups.mounts import cgroup_mounts

__all__ = ["Hierarchy", "detect_hierarchy", "CgroupIndex", "relative_cgroup_path"]


@dataclass(frozen=True)
class Hierarchy:
    #: "v2" or the v1 controller the ids come from ("cpu", "cpuset", ...)
    name: str
    mount: Path

    @property
    def is_v2(self) -> bool:
        return self.name == "v2"


def detect_hierarchy(setting: str = "auto", procfs_root: str = "/proc") -> Hierarchy:
    """The hierarchy pods' CPU cgroups live in.

    auto: a pure v2 host uses v2; a v1/hybrid host uses the v1 ``cpu`` controller
    (cpuset as second choice), because containers there are placed in v1 and the
    v2 tree, if mounted, is usually empty.
    """
    mounts = cgroup_mounts(procfs_root)
    if setting != "auto":
        if setting not in mounts:
            raise ValueError(f"cgroup hierarchy {setting!r} is not mounted (mounted: {', '.join(sorted(mounts)) or 'none'})")
        return Hierarchy(setting, mounts[setting])
    v1 = [c for c in ("cpu", "cpuset") if c in mounts]
    if v1:
        return Hierarchy(v1[0], mounts[v1[0]])
    if "v2" in mounts:
        return Hierarchy("v2", mounts["v2"])
    raise ValueError("no cgroup hierarchy mounted (looked for cgroup2, and cgroup v1 cpu/cpuset)")


def relative_cgroup_path(path: str, mounts: dict[str, Path] | None = None) -> str:
    """'/sys/fs/cgroup/cpu/a/b' or 'a/b' or '/a/b' -> '/a/b'."""
    p = path.rstrip("/") or "/"
    for mnt in sorted((mounts or {}).values(), key=lambda m: len(str(m)), reverse=True):
        m = str(mnt).rstrip("/")
        if p == m:
            return "/"
        if p.startswith(m + "/"):
            return p[len(m) :]
    return p if p.startswith("/") else "/" + p


class CgroupIndex:
    """inode -> relative path for one hierarchy, refreshed by a walk on a miss."""

    def __init__(self, mount: Path, min_refresh_s: float = 1.0) -> None:
        self.mount = Path(mount)
        self.min_refresh_s = min_refresh_s
        self._by_ino: dict[int, str] = {}
        self._last_walk = -1e9

    def refresh(self) -> None:
        found: dict[int, str] = {}
        base = str(self.mount)

        def walk(d: str, rel: str) -> None:
            try:
                found[os.stat(d).st_ino] = rel or "/"
                with os.scandir(d) as it:
                    for e in it:
                        if e.is_dir(follow_symlinks=False):
                            walk(e.path, f"{rel}/{e.name}")
            except OSError:
                return  # removed while walking

        walk(base, "")
        self._by_ino = found
        self._last_walk = time.monotonic()

    def path(self, cgid: int) -> str | None:
        p = self._by_ino.get(cgid)
        if p is None and time.monotonic() - self._last_walk >= self.min_refresh_s:
            self.refresh()
            p = self._by_ino.get(cgid)
        return p
