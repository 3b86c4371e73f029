"""What pressure does itself about an eviction: report it, and keep the record.

Who acts on an eviction is not pressure's to build: the runtime (standalone) or
the Katalyst eviction plugin (kubelet mode) publishes an ``Evictor``
(``agent.contracts.EVICTOR``), and a pod's resources are released by admission
when the pod ends. When no evictor is there, or it does not act now (Katalyst
has not registered the plugin), pressure reports the eviction: the log, the
metrics, the record and optionally a hook command that can ask the kubelet/API
to evict. Either way every eviction is appended to a JSON-lines record with its
evidence.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from collections import deque
from pathlib import Path
from typing import Any

from agent import jsonlines
from agent.eventlog import get_logger
from agent.contracts.pressure import Eviction

log = get_logger("hwagent.pressure")

__all__ = ["ReportEviction", "EvictionRecord"]


class ReportEviction:
    """Pressure's own answer when nobody acts on an eviction (an ``Evictor`` that always accepts)."""

    name = "report"

    def __init__(self, hook: str = "") -> None:
        self.hook = hook

    def accepting(self) -> bool:
        return True

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


#: how much of the end of evictions.jsonl a start reads back (a few hundred records)
TAIL_BYTES = 1 << 20


def read_tail(path: Path, keep: int, max_bytes: int = TAIL_BYTES) -> list[dict[str, Any]]:
    """The last ``keep`` records of evictions.jsonl (of its last ``max_bytes``); none when it is absent."""
    return jsonlines.read_tail(path, keep, max_bytes)


class EvictionRecord:
    """Every eviction, with reason, evidence and outcome: in memory and as JSON lines."""

    def __init__(self, path: Path | None = None, keep: int = 200) -> None:
        self.path = path
        # the file outlives the daemon: a restarted one shows the evictions it holds
        # (`hwagent status` said "last evictions: none" with five in the file)
        self.recent: deque[dict[str, Any]] = deque(read_tail(path, keep) if path is not None else (), maxlen=keep)

    def add(self, ev: Eviction, action: str, outcome: dict[str, Any]) -> dict[str, Any]:
        rec = dataclasses.asdict(ev)
        rec["evidence"] = dict(ev.evidence)
        rec.update(action=action, outcome=outcome, wall_time=time.time())
        self.recent.append(rec)
        if self.path is not None:
            try:
                jsonlines.append_record(self.path, rec)
            except OSError as e:
                log.error("eviction record write failed", path=self.path, error=e.strerror)
        return rec
