"""Killing every process of a workload cgroup subtree, and nothing outside it.

Eviction (agent.pressure) and the workload runtime (agent.runtime) both end a
pod or container this way. The path they pass comes from outside hwagent (a
launcher's bind_cgroup, a checkpoint, the kubelet), so it goes through
``validate_rel_path`` with the configured workload roots first: a path like
"/kubepods/.." or "/system.slice" is refused before any directory is read.

How: on cgroup v2 (the unified mount, with or without controllers) a cgroup
with ``cgroup.kill`` is killed by the kernel in one write, forks racing the
kill included. Everywhere else (v1 hierarchies, kernels before 5.14) every pid
in ``cgroup.procs`` of the subtree gets SIGKILL, repeated until the subtree is
empty or the timeout passes, so processes forked during a round are caught by
the next. hwagent never signals itself.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.cgroups.mounts import cgroup_mounts
from agent.cgroups.paths import DEFAULT_WORKLOAD_ROOTS, validate_rel_path
from agent.cgroups.tree import cgroup_dirs, cgroup_procs
from agent.eventlog import get_logger

__all__ = ["KillResult", "kill_cgroup"]

log = get_logger("hwagent.cgroups")

#: time between rounds of SIGKILL (v1) or looks at cgroup.procs (v2 cgroup.kill)
_ROUND_S = 0.02


@dataclass(frozen=True)
class KillResult:
    #: the validated path that was killed ("/kubepods/pod1/c1")
    path: str
    #: distinct processes seen in the subtree and signalled (or killed through cgroup.kill)
    killed: int
    #: processes still there when the timeout passed (0: the subtree is empty)
    remaining: int
    #: "cgroup.kill" when the kernel did it, "sigkill" when each pid was signalled, "" if not found
    methods: tuple[str, ...] = field(default=())


def kill_cgroup(
    rel_path: str,
    mounts: Mapping[str, Path] | None = None,
    *,
    allowed_roots: Sequence[str] = DEFAULT_WORKLOAD_ROOTS,
    timeout_s: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
) -> KillResult:
    """SIGKILL every process in the cgroup subtree ``rel_path`` in every hierarchy of
    ``mounts`` (controller or "v2" -> mount point; default: this process's mount table)
    it exists in.

    ``rel_path`` may be relative to a controller root or a full path under one of the
    mounts. Raises CgroupPathError (a ValueError) for a path outside ``allowed_roots``
    or otherwise invalid; nothing is read or signalled then.
    """
    if mounts is None:
        mounts = cgroup_mounts()
    rel = validate_rel_path(rel_path, allowed_roots, mounts=mounts.values())
    me = os.getpid()
    trees = {name: cgroup_dirs(Path(m), rel) for name, m in mounts.items()}
    trees = {name: dirs for name, dirs in trees.items() if dirs}
    methods: list[str] = []
    killed: set[int] = set()
    deadline = clock() + timeout_s
    v2 = trees.get("v2")
    if v2 and (v2[0] / "cgroup.kill").exists():
        before = cgroup_procs(v2)
        if me in before:  # cgroup.kill cannot spare one process: fall back to signals
            log.warning("cgroup kill skipped", path=rel, reason="holds_hwagent")
        else:
            try:
                (v2[0] / "cgroup.kill").write_text("1")
                killed |= before
                methods.append("cgroup.kill")
                while cgroup_procs(v2) and clock() <= deadline:  # the kernel reaps them asynchronously
                    time.sleep(_ROUND_S)
            except OSError as e:
                if e.errno not in (errno.ENOENT, errno.ENODEV):
                    log.warning("cgroup kill write failed", path=rel, error=e.strerror)
    all_dirs = [d for dirs in trees.values() for d in dirs]
    while True:
        pids = cgroup_procs(all_dirs)
        pids.discard(me)
        if not pids:
            return KillResult(rel, len(killed), 0, tuple(methods))
        signalled = False
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
                signalled = True
            except ProcessLookupError:
                pass
        if signalled and "sigkill" not in methods:
            methods.append("sigkill")
        if clock() > deadline:
            log.error("cgroup kill incomplete", path=rel, remaining=len(pids))
            return KillResult(rel, len(killed), len(pids), tuple(methods))
        time.sleep(_ROUND_S)
