"""The advisor's decisions log and saved state on disk, and the readers `hwagent explain`
and `describe` use.

``<root>/advisor/decisions.jsonl``: one JSON object per decision (inputs, target,
controller state, output), beside ``<root>/pressure/evictions.jsonl``; bounded: past
``keep`` lines it is rotated to ``decisions.jsonl.1`` (one old file kept), so it never
grows without end. ``<root>/advisor/state.json``: the controller's outputs and the CPU
quotas it replaced, written (atomically) after every change, read back at start.

Import-light on purpose (json, os only): the CLI reads these files without the daemon.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from agent.jsonlines import PRIVATE_MODE, append_record, read_tail

#: typing is not imported at run time (the CLI's start-up cost, as agent.commands._admission); mypy reads it
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["DecisionLog", "read_decisions", "read_state", "write_state", "DECISIONS", "STATE", "advisor_dir",
           "decisions_before", "format_decision"]

DECISIONS = "decisions.jsonl"
STATE = "state.json"
#: how much of the end of a decisions file a reader takes (some thousands of lines)
TAIL_BYTES = 4 << 20


def advisor_dir(root: str | Path) -> Path:
    return Path(root) / "advisor"


def _tail(path: Path) -> list[dict[str, Any]]:
    """Every record of the file's last ``TAIL_BYTES`` (the reader evictions.jsonl has too)."""
    return read_tail(path, sys.maxsize, TAIL_BYTES)


def read_decisions(root: str | Path, last: int | None = None) -> list[dict[str, Any]]:
    """The decisions on disk, oldest first (the rotated file, then the current one)."""
    d = advisor_dir(root)
    recs = _tail(d / (DECISIONS + ".1")) + _tail(d / DECISIONS)
    return recs if last is None else recs[-last:]


def read_state(root: str | Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((advisor_dir(root) / STATE).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def write_state(root: str | Path, doc: dict[str, Any]) -> None:
    """Atomically: a crash leaves the old state or the new one, never half of one."""
    d = advisor_dir(root)
    tmp = d / (STATE + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, PRIVATE_MODE)
    with open(fd, "w") as f:
        os.fchmod(fd, PRIVATE_MODE)  # a temp left 0644 by an earlier version keeps its mode through O_TRUNC
        json.dump(doc, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, d / STATE)


class DecisionLog:
    """Appends decisions; rotates past ``keep`` lines."""

    def __init__(self, root: str | Path, keep: int = 5000) -> None:
        self.dir = advisor_dir(root)
        self.path = self.dir / DECISIONS
        self.keep = keep
        try:
            with open(self.path, "rb") as f:
                self.lines = sum(1 for _ in f)
        except OSError:
            self.lines = 0

    def append(self, rec: dict[str, Any]) -> None:
        if self.lines >= self.keep:
            os.replace(self.path, self.path.with_name(DECISIONS + ".1"))
            self.lines = 0
        append_record(self.path, rec)
        self.lines += 1


def decisions_before(root: str | Path, wall_time: float, n: int = 3) -> list[dict[str, Any]]:
    """The last ``n`` decisions recorded at or before ``wall_time`` (an eviction's time)."""
    return [r for r in read_decisions(root) if (r.get("wall_time") or 0) <= wall_time][-n:]


def format_decision(rec: dict[str, Any]) -> str:
    """One line: when, what, the output and why."""
    at = time.strftime("%H:%M:%S", time.gmtime(rec.get("wall_time") or 0))
    q = rec.get("quota_cpus")
    inputs = rec.get("inputs") or {}
    p99 = inputs.get("shared_p99_us")
    pl = rec.get("placement")
    where = f"; cpus {pl.get('cpus')}: {pl.get('reason')}" if isinstance(pl, dict) and pl.get("add", "") + \
        pl.get("remove", "") else ""
    return (f"{at} {rec.get('action', '?'):<8} shared={rec.get('shared_size')} "
            f"quota={'none' if q is None else q} p99={'-' if p99 is None else f'{p99:.0f}us'} "
            f"evict={'yes' if rec.get('evict') else 'no'}: {rec.get('reason', '')}{where}")
