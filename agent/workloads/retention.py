"""Which ended pods the daemon removes: journald's habits (count, age, bytes) applied to pods.

A pod that ended and was not removed keeps its record (``hwagent ps``, ``describe``, the exit
status ``launch --wait`` reads) and its logs. Unbounded, both grow with every job a user
forgets to ``rm`` (issue 32: 963 pods, daemon RSS 80 -> 228 MB, ~47 MB of logs per
container). The kubelet garbage-collects dead containers by count and age; journald drops
its oldest files by count, age and bytes. hwagent removes whole ended pods, record and logs
together, oldest first (by the time they ended), as ``hwagent rm`` would: a record without
its logs, or logs without a record, would be half a pod, and the record is what costs the
daemon memory. Docker keeps ended containers until removed; a node agent that serves many
users cannot.

The rule (``[workloads] ended_pods_*``, 0 = no limit):

- ``per_user``: each user keeps its newest ``per_user`` ended pods;
- ``total``: the node keeps its newest ``total`` ended pods;
- ``max_age_s``: an ended pod goes once it ended longer ago than this;
- ``log_bytes``: while the ended pods' logs hold more than this, the oldest go, but never
  a user's newest ended pod (the one a ``launch --wait`` is reading the end of).

``expired`` is the pure decision; ``agent.workloads.autoremove`` applies it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Ended", "RetentionRule", "expired"]


@dataclass(frozen=True)
class Ended:
    """One ended pod that nobody removed yet."""

    uid: str
    #: the user the pod ran as (0: root)
    owner: int
    #: unix time it ended
    finished_at: float
    #: bytes of its log directory (0 when not measured: the bytes rule is off)
    log_bytes: int = 0


@dataclass(frozen=True)
class RetentionRule:
    per_user: int = 0
    total: int = 0
    max_age_s: float = 0.0
    log_bytes: int = 0

    @property
    def measures_bytes(self) -> bool:
        return self.log_bytes > 0

    @property
    def off(self) -> bool:
        return not (self.per_user or self.total or self.max_age_s or self.log_bytes)


def expired(ended: Iterable[Ended], rule: RetentionRule, now: float) -> list[tuple[str, str]]:
    """The ended pods to remove, oldest first, each with the rule it broke
    (``(uid, why)``, ``why`` one of "per_user", "total", "max_age", "log_bytes")."""
    newest_first = sorted(ended, key=lambda e: (-e.finished_at, e.uid))
    why: dict[str, str] = {}
    seen: dict[int, int] = {}
    kept = 0
    for e in newest_first:
        seen[e.owner] = seen.get(e.owner, 0) + 1
        if rule.max_age_s and now - e.finished_at > rule.max_age_s:
            why[e.uid] = "max_age"
        elif rule.per_user and seen[e.owner] > rule.per_user:
            why[e.uid] = "per_user"
        elif rule.total and kept >= rule.total:
            why[e.uid] = "total"
        else:
            kept += 1
    if rule.log_bytes:
        held = sum(e.log_bytes for e in newest_first if e.uid not in why)
        newest_of: set[str] = set()
        owners: set[int] = set()
        for e in newest_first:
            if e.owner not in owners:
                owners.add(e.owner)
                newest_of.add(e.uid)
        for e in reversed(newest_first):  # oldest first
            if held <= rule.log_bytes:
                break
            if e.uid in why or e.uid in newest_of:
                continue
            why[e.uid] = "log_bytes"
            held -= e.log_bytes
    return [(e.uid, why[e.uid]) for e in reversed(newest_first) if e.uid in why]
