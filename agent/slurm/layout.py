"""Slurm's cgroup layout, read as kubelet mode reads ``kubepods`` (pure parsing + one thin walker).

Slurm 22.05's cgroup plugins name their tree (src/plugins/cgroup/v1, v2):

- v1, in each controller it uses (freezer for proctrack/cgroup; cpuset, memory,
  devices for task/cgroup): ``<prepend>/uid_<uid>/job_<job>/step_<step>/task_<t>``.
  The prepend is ``slurm``, or ``slurm_<node>`` when slurmd is built for several
  daemons on one host (Debian's build is: each node gets its own subtree);
- v2: ``system.slice/slurmstepd.scope/job_<job>/step_<step>/user/task_<t>`` (and
  ``<node>_slurmstepd.scope`` for several daemons), the step's own slurmstepd in
  ``step_<step>/slurm``. No uid level: Slurm is asked whose job it is.

``<step>`` is a number, ``batch``, ``extern`` or ``interactive`` (a het job's component
adds ``+<n>``). Everything else under those directories is not a step and is skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["StepCgroup", "has_slurm_tree", "parse_step_path", "walk_slurm_cgroups", "V1_PREFIX", "V2_SCOPE"]

#: a v1 tree's top directory: ``slurm`` or ``slurm_<node>``
V1_PREFIX = re.compile(r"^slurm(?:_(?P<node>[A-Za-z0-9][A-Za-z0-9_.-]*))?$")
#: a v2 stepd scope: ``slurmstepd.scope`` or ``<node>_slurmstepd.scope``
V2_SCOPE = re.compile(r"^(?:(?P<node>[A-Za-z0-9][A-Za-z0-9_.-]*)_)?slurmstepd\.scope$")
_UID = re.compile(r"^uid_(\d{1,10})$")
_JOB = re.compile(r"^job_(\d{1,10})$")
_STEP = re.compile(r"^step_(\d{1,10}|batch|extern|interactive)(?:\+\d{1,5})?$")
_TASK = re.compile(r"^task_(\d{1,10})$")


@dataclass(frozen=True)
class StepCgroup:
    """One Slurm step's cgroup, as the layout names it."""

    job: str
    step: str
    #: the cgroup's path below the hierarchy's root ("/slurm_n1/uid_0/job_5/step_0")
    path: str
    #: the node the tree belongs to (``slurm_<node>``, ``<node>_slurmstepd.scope``); "" when unnamed
    node: str = ""
    #: v1's ``uid_<u>`` level; None on v2 (Slurm says whose job it is)
    uid: int | None = None
    #: the task ids below the step (``task_<t>``)
    tasks: tuple[int, ...] = ()


def parse_step_path(rel: str) -> StepCgroup | None:
    """A step from its cgroup path below the hierarchy's root (any parent above Slurm's own
    directories), or None when the path is not a step's. ``task_<t>`` is read by the walker."""
    parts = [p for p in rel.split("/") if p]
    if len(parts) < 3:
        return None
    step_m, job_m = _STEP.match(parts[-1]), _JOB.match(parts[-2])
    if step_m is None or job_m is None:
        return None
    path = "/" + "/".join(parts)
    job, step = job_m.group(1), parts[-1][len("step_"):]
    uid_m = _UID.match(parts[-3])
    if uid_m is not None and len(parts) >= 4:
        top = V1_PREFIX.match(parts[-4])
        if top is not None:
            return StepCgroup(job, step, path, top.group("node") or "", int(uid_m.group(1)))
        return None
    scope = V2_SCOPE.match(parts[-3])
    if scope is not None:
        return StepCgroup(job, step, path, scope.group("node") or "", None)
    return None


def _subdirs(d: str) -> Iterator[str]:
    try:
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    yield e.name
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return


def _task_ids(step_dir: str, v2: bool) -> tuple[int, ...]:
    """``task_<t>`` right below the step (v1) or below its ``user`` directory (v2)."""
    out = []
    for name in _subdirs(os.path.join(step_dir, "user") if v2 else step_dir):
        m = _TASK.match(name)
        if m is not None:
            out.append(int(m.group(1)))
    return tuple(sorted(out))


def _tops(root: str, node: str | None) -> Iterator[tuple[str, str]]:
    """(directory, path below root) of every Slurm tree top under ``root``: v1 ``slurm[_<node>]``
    and v2 ``system.slice/[<node>_]slurmstepd.scope``; ``node`` keeps that node's (and unnamed) only."""
    def wanted(named: str) -> bool:
        return node is None or named in ("", node)

    for name in _subdirs(root):
        m = V1_PREFIX.match(name)
        if m is not None and wanted(m.group("node") or ""):
            yield os.path.join(root, name), "/" + name
    for name in _subdirs(os.path.join(root, "system.slice")):
        m = V2_SCOPE.match(name)
        if m is not None and wanted(m.group("node") or ""):
            yield os.path.join(root, "system.slice", name), f"/system.slice/{name}"


def has_slurm_tree(root: str | Path, parent: str = "", node: str | None = None) -> bool:
    """Whether ``root`` (one hierarchy) holds a Slurm tree of ``node``: a listing of one or two
    directories, so the walk can keep to the one hierarchy that has it."""
    base = os.path.join(str(root), parent.strip("/")) if parent.strip("/") else str(root)
    return next(_tops(base, node), None) is not None


def walk_slurm_cgroups(root: str | Path, parent: str = "", node: str | None = None) -> list[StepCgroup]:
    """Every step cgroup of Slurm's tree in one hierarchy: ``root`` is the hierarchy's mount (a
    fixture tree in tests), ``parent`` where Slurm's tree hangs below it, ``node`` this node's
    name (None: every node's). Depth is fixed by the layout: no unbounded walk, no links followed."""
    base = os.path.join(str(root), parent.strip("/")) if parent.strip("/") else str(root)
    rel_base = "/" + parent.strip("/") if parent.strip("/") else ""
    out: list[StepCgroup] = []
    for top, top_rel in _tops(base, node):
        levels: Iterable[tuple[str, str]]
        if top_rel.startswith("/system.slice/"):
            levels = [(top, top_rel)]
        else:
            levels = [(os.path.join(top, u), f"{top_rel}/{u}") for u in _subdirs(top) if _UID.match(u)]
        v2 = top_rel.startswith("/system.slice/")
        for d, rel in levels:
            for j in _subdirs(d):
                if not _JOB.match(j):
                    continue
                for s in _subdirs(os.path.join(d, j)):
                    step = parse_step_path(f"{rel_base}{rel}/{j}/{s}")
                    if step is not None:
                        tasks = _task_ids(os.path.join(d, j, s), v2)
                        out.append(StepCgroup(step.job, step.step, step.path, step.node, step.uid, tasks))
    return sorted(out, key=lambda s: (s.path))
