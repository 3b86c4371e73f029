"""Slurm's cgroup plugins (proctrack/cgroup, task/cgroup) confined to a test-owned subtree.

On this host's hybrid v1 layout slurm 22.05's cgroup/v1 plugin makes its tree at
``<CgroupMountpoint>/<controller>/slurm_<node>`` (Debian builds slurmd for several
daemons per host, so each node gets its own ``slurm_<node>``; src/common/cgroup.c,
src/plugins/cgroup/v1/xcgroup.c). A v1 controller cannot be mounted a second time as
a separate hierarchy (a second mount shows the same one), so the tree cannot be given
a hierarchy of its own. What can: ``CgroupMountpoint`` points at a test directory whose
``<controller>`` entries are links to a test-owned cgroup in the real hierarchy,
``/sys/fs/cgroup/<controller>/<tag>``. The plugin only asks that ``tasks`` be readable
there; everything it makes lands below ``<tag>``, and ``remove`` takes the subtree
away (deepest first) once the daemons are gone.

One thing this changes in Slurm: ``cgroup_p_has_pid`` compares the path it builds from
``/proc/<pid>/cgroup`` (which names ``<tag>``) with the step's (which does not), so it
answers "not ours" (used to adopt processes into a job's extern step, as pam_slurm_adopt
does). No test here adopts processes.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONTROLLERS", "SlurmCgroups"]

#: what proctrack/cgroup (freezer) and task/cgroup (cpuset, memory, devices) use
CONTROLLERS = ("freezer", "cpuset", "memory", "devices")
V1_ROOT = Path("/sys/fs/cgroup")


@dataclass
class SlurmCgroups:
    """The test-owned subtree ``<tag>`` in each controller and the link directory slurmd mounts from."""

    tag: str
    links: Path
    v1_root: Path = V1_ROOT

    def subtree(self, controller: str) -> Path:
        return self.v1_root / controller / self.tag

    def create(self) -> None:
        self.links.mkdir(parents=True, exist_ok=True)
        for c in CONTROLLERS:
            d = self.subtree(c)
            d.mkdir(exist_ok=True)
            if c == "cpuset":  # a v1 cpuset holds no task until it has CPUs and memory nodes
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (d / f).write_text((self.v1_root / c / f).read_text())
            link = self.links / c
            if not link.is_symlink():
                link.symlink_to(d)

    def cgroup_conf(self) -> str:
        return "\n".join([
            "CgroupPlugin=cgroup/v1",
            f"CgroupMountpoint={self.links}",
            "ConstrainCores=yes",
            "ConstrainRAMSpace=yes",
            "ConstrainDevices=yes",
        ]) + "\n"

    def dirs(self) -> list[Path]:
        """Every cgroup below the subtrees, deepest first."""
        out: list[Path] = []
        for c in CONTROLLERS:
            top = self.subtree(c)
            if top.is_dir():
                out.extend(Path(root) for root, _dirs, _files in os.walk(top, topdown=False))
        return out

    def pids(self) -> set[int]:
        """Every process still in the subtrees (the freezer's: proctrack/cgroup tracks each step there)."""
        out: set[int] = set()
        for d in self.dirs():
            try:
                out.update(int(p) for p in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                continue
        return out

    def remove(self, timeout: float = 10.0) -> list[str]:
        """Remove the subtrees (slurmstepd removes its own; what is left is the nodes' tops).
        A step whose slurmd and controller were stopped under it (a test that failed with a job
        still running) keeps its slurmstepd waiting for the controller forever: every process
        still in the test's own subtree is this cluster's, and is killed (by pid) first.
        Returns what could not be removed (a cgroup still holding a process) after ``timeout``."""
        import signal

        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        left: list[str] = []
        while True:
            left = []
            for d in self.dirs():
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as e:
                    left.append(f"{d}: {e.strerror}")
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for c in CONTROLLERS:
            link = self.links / c
            if link.is_symlink():
                link.unlink()
        return left
