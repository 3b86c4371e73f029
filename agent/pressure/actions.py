"""What an eviction does: an interface with a standalone and a kubelet-mode action.

standalone: hwagent owns the node, so it kills the pod's container cgroups'
processes (agent.cgroups.kill, inside the workload subtrees only) and releases
the pod's CPUs and devices.
kubelet: the kubelet owns pod lifecycle; hwagent reports (log, metrics, record)
and optionally runs a hook command that can ask the kubelet/API to evict.
Either way every eviction is appended to a JSON-lines record with its evidence.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from agent.cgroups.kill import kill_cgroup
from agent.cgroups.paths import DEFAULT_WORKLOAD_ROOTS, CgroupPathError
from agent.cgroups.mounts import cgroup_mounts
from agent.contracts import CPUAllocator, DeviceAllocator
from agent.eventlog import get_logger
from agent.pressure.eviction import Eviction

log = get_logger("hwagent.pressure")

__all__ = ["EvictionAction", "StandaloneEviction", "ReportEviction", "EvictionRecord"]


class EvictionAction(Protocol):
    name: str

    def execute(self, ev: Eviction, cgroup_paths: list[str]) -> dict[str, Any]:
        """The slow, self-contained part (kill processes, run a hook): may run in a
        worker thread. Returns what was done (goes into the record)."""

    def finish(self, ev: Eviction, outcome: dict[str, Any]) -> None:
        """The part that changes other components' state (release CPUs and devices):
        runs on the thread that owns them, the daemon's loop. Adds to ``outcome``."""


class StandaloneEviction:
    name = "standalone"

    def __init__(
        self,
        procfs_root: str = "/proc",
        cgroup_roots: Sequence[str] = DEFAULT_WORKLOAD_ROOTS,
        *,
        cpu: CPUAllocator | None = None,
        devices: DeviceAllocator | None = None,
    ) -> None:
        #: released on the loop once the kill is done (both started before pressure)
        self.cpu = cpu
        self.devices = devices
        self.procfs_root = procfs_root
        self.cgroup_roots = tuple(cgroup_roots)

    def execute(self, ev: Eviction, cgroup_paths: list[str]) -> dict[str, Any]:
        mounts = cgroup_mounts(self.procfs_root)
        killed = 0
        refused: list[str] = []
        for p in cgroup_paths:
            try:
                killed += kill_cgroup(p, mounts, allowed_roots=self.cgroup_roots).killed
            except CgroupPathError as e:
                log.error("eviction kill refused", pod=ev.pod_uid, path=p, error=e)
                refused.append(p)
        out: dict[str, Any] = {"killed_processes": killed}
        if refused:
            out["refused_paths"] = refused
        return out

    def finish(self, ev: Eviction, outcome: dict[str, Any]) -> None:
        released = []
        steps: list[tuple[str, Callable[[str], None] | None]] = [
            ("cpu_policy", self.cpu.remove_pod if self.cpu is not None else None),
            ("devicemanager", self.devices.release_pod if self.devices is not None else None),
        ]
        for key, release in steps:
            if release is None:
                continue
            try:
                release(ev.pod_uid)
                released.append(key)
            except Exception as e:  # keep going: the processes are already dead
                log.error("eviction release failed", service=key, pod=ev.pod_uid, error=repr(e))
        outcome["released"] = released


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

    def finish(self, ev: Eviction, outcome: dict[str, Any]) -> None:
        """Nothing of hwagent's changes: the kubelet owns the pod's life cycle."""


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
                log.error("eviction record write failed", path=self.path, error=e.strerror)
        return rec
