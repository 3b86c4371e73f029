"""Which cgroup hierarchy a root holds: v1, v2 (unified) or hybrid.

Decided from the tree itself, not from /proc/mounts, so the same code reads a
fake tree in tests: v2 has ``cgroup.controllers`` at the root; hybrid has per-
controller v1 directories plus a v2 mount at ``unified/``; v1 has only the
per-controller directories.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: :mod:`typing` costs ``hwagent topology`` (which reaches this module for
#: V1_CONTROLLERS) about 1.6 ms of a few-ms reading; mypy takes the name
#: ``TYPE_CHECKING`` as true whatever it is bound to
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

__all__ = ["CgroupError", "CgroupLayout", "V1_CONTROLLERS", "DEFAULT_CGROUP_ROOT", "cgroup_mount_root", "detect"]

if TYPE_CHECKING:
    Mode = Literal["v1", "v2", "hybrid"]
#: where hosts mount the cgroup hierarchies
DEFAULT_CGROUP_ROOT = "/sys/fs/cgroup"
V1_CONTROLLERS = ("cpuset", "cpu", "cpuacct", "memory", "pids", "blkio", "devices", "freezer")


class CgroupError(Exception):
    """No usable cgroup hierarchy, or a path outside it."""


@dataclass(frozen=True)
class CgroupLayout:
    mode: Mode
    root: Path
    #: controllers enabled at the v2 root (v2 and hybrid); empty for v1
    v2_controllers: frozenset[str] = frozenset()

    def is_v2(self, controller: str) -> bool:
        """Whether ``controller`` is driven through the v2 hierarchy."""
        if self.mode == "v2":
            return True
        if self.mode == "hybrid":
            # the set first: a stat only for a controller the v2 root offers (per container created)
            return controller in self.v2_controllers and not (self.root / controller).is_dir()
        return False

    def controller_root(self, controller: str) -> Path:
        if self.mode == "v2":
            return self.root
        if self.is_v2(controller):
            return self.root / "unified"
        return self.root / controller


def _controllers(path: Path) -> frozenset[str]:
    try:
        return frozenset(path.read_text().split())
    except OSError:
        return frozenset()


def cgroup_mount_root(sysfs_root: str | Path = "/sys") -> Path:
    """The cgroup mount root below a sysfs root (a fixture's sys/ or the live /sys)."""
    return Path(sysfs_root) / "fs" / "cgroup"


def detect(root: str | Path = DEFAULT_CGROUP_ROOT) -> CgroupLayout:
    r = Path(root)
    if (r / "cgroup.controllers").is_file():
        return CgroupLayout("v2", r, _controllers(r / "cgroup.controllers"))
    v1 = [c for c in V1_CONTROLLERS if (r / c).is_dir()]
    if (r / "unified" / "cgroup.controllers").is_file() and v1:
        return CgroupLayout("hybrid", r, _controllers(r / "unified" / "cgroup.controllers"))
    if v1:
        return CgroupLayout("v1", r)
    raise CgroupError(f"no cgroup hierarchy found under {r} (neither cgroup.controllers nor v1 controller dirs)")
