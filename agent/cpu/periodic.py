"""Pure bookkeeping for the periodic work (the component owns the timers)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ResidualTracker"]


class ResidualTracker:
    """Pods in state but missing from the active set are forgotten once they
    have been missing for ``grace_s`` (upstream: 5 min counted in 30 s hits).
    A pod that shows up again is dropped from the tracker."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.missing_since: dict[str, float] = {}

    def due(self, state_pods: Iterable[str], active: frozenset[str], now: float) -> list[str]:
        state_set = set(state_pods)
        for uid in list(self.missing_since):
            if uid in active or uid not in state_set:
                del self.missing_since[uid]
        for uid in state_set - active:
            self.missing_since.setdefault(uid, now)
        return sorted(u for u, t in self.missing_since.items() if now - t >= self.grace_s)

    def forget(self, uid: str) -> None:
        self.missing_since.pop(uid, None)
