"""What an eviction does: an interface with a standalone and a kubelet-mode action.

standalone: hwagent owns the node, so it kills the pod's container cgroups'
processes and releases the pod's CPUs and devices.
kubelet: the kubelet owns pod lifecycle; hwagent reports (log, metrics, record)
and optionally runs a hook command that can ask the kubelet/API to evict.
Either way every eviction is appended to a JSON-lines record with its evidence.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import time
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from agent.pressure.cgroupfs import cgroup_dirs, cgroup_mounts, relative_cgroup_path
from agent.pressure.eviction import Eviction

log = logging.getLogger("hwagent.pressure")

__all__ = ["EvictionAction", "StandaloneEviction", "ReportEviction", "EvictionRecord", "kill_cgroup"]


class EvictionAction(Protocol):
    name: str

    def execute(self, ev: Eviction, cgroup_paths: list[str]) -> dict[str, Any]:
        """Carry out the eviction; return what was done (goes into the record)."""


def _pids(mount: Path, rel: str) -> set[int]:
    out: set[int] = set()
    for d in cgroup_dirs(mount, rel):
        try:
            out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        except (OSError, ValueError):
            pass
    return out


def kill_cgroup(rel_path: str, mounts: dict[str, Path], timeout_s: float = 2.0) -> int:
    """SIGKILL every process in the cgroup subtree (in every hierarchy it exists in).

    Repeats until the subtree is empty or the timeout passes (forks racing the
    kill land in the same cgroup and are caught by the next round). Returns the
    number of processes signalled. Never touches a cgroup outside the path.
    """
    if rel_path in ("", "/"):
        raise ValueError("refusing to kill the root cgroup")
    dirs = {m for m in mounts.values() if (m / rel_path.lstrip("/")).is_dir()}
    killed: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        pids = set().union(*(_pids(m, rel_path) for m in dirs)) if dirs else set()
        pids.discard(os.getpid())
        if not pids:
            return len(killed)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            log.error("eviction_kill_incomplete cgroup=%s remaining=%d", rel_path, len(pids))
            return len(killed)
        time.sleep(0.02)


class StandaloneEviction:
    name = "standalone"

    def __init__(self, services: dict[str, Any], procfs_root: str = "/proc") -> None:
        self.services = services
        self.procfs_root = procfs_root

    def execute(self, ev: Eviction, cgroup_paths: list[str]) -> dict[str, Any]:
        mounts = cgroup_mounts(self.procfs_root)
        killed = 0
        for p in cgroup_paths:
            killed += kill_cgroup(relative_cgroup_path(p, mounts), mounts)
        released = []
        for key, method in (("cpu_policy", "remove_pod"), ("devicemanager", "release_pod")):
            svc = self.services.get(key)
            if svc is None:
                continue
            try:
                getattr(svc, method)(ev.pod_uid)
                released.append(key)
            except Exception as e:  # keep going: the processes are already dead
                log.error("eviction_release_failed service=%s pod=%s error=%r", key, ev.pod_uid, e)
        return {"killed_processes": killed, "released": released}


class ReportEviction:
    name = "report"

    def __init__(self, hook: str = "") -> None:
        self.hook = hook

    def execute(self, ev: Eviction, cgroup_paths: list[str]) -> dict[str, Any]:
        if not self.hook:
            return {"reported": True}
        env = dict(os.environ)
        env.update(
            HWAGENT_EVICT_POD_UID=ev.pod_uid,
            HWAGENT_EVICT_NAMESPACE=ev.pod_namespace,
            HWAGENT_EVICT_POD=ev.pod_name,
            HWAGENT_EVICT_REASON=ev.reason,
            HWAGENT_EVICT_EVIDENCE=json.dumps(dict(ev.evidence), sort_keys=True),
        )
        try:
            r = subprocess.run(self.hook, shell=True, env=env, timeout=30, capture_output=True, text=True)
            return {"reported": True, "hook_rc": r.returncode}
        except subprocess.TimeoutExpired:
            return {"reported": True, "hook_rc": None, "hook_error": "timeout"}


class EvictionRecord:
    """Every eviction, with reason, evidence and outcome: in memory and as JSON lines."""

    def __init__(self, path: Path | None = None, keep: int = 200) -> None:
        self.path = path
        self.recent: deque[dict[str, Any]] = deque(maxlen=keep)

    def add(self, ev: Eviction, action: str, outcome: dict[str, Any]) -> dict[str, Any]:
        rec = dataclasses.asdict(ev)
        rec["evidence"] = dict(ev.evidence)
        rec.update(action=action, outcome=outcome, wall_time=time.time())
        self.recent.append(rec)
        if self.path is not None:
            try:
                with open(self.path, "a") as f:
                    f.write(json.dumps(rec, sort_keys=True) + "\n")
            except OSError as e:
                log.error("eviction_record_write_failed path=%s error=%s", self.path, e.strerror)
        return rec
