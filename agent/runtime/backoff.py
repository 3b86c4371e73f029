"""The kubelet's crash-loop back-off for one container (pure).

Each failed run doubles the delay before the next start, from ``initial`` up
to ``max``; a run that lasted at least ``reset_after`` starts over at
``initial``. Constants are injectable so tests run in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    initial_s: float = 10.0
    max_s: float = 300.0
    reset_after_s: float = 600.0
    #: the delay the next restart waits; 0 before the first crash
    current_s: float = 0.0

    def after_exit(self, ran_s: float) -> Backoff:
        """The state after a run of ``ran_s`` seconds ended and will be restarted."""
        if ran_s >= self.reset_after_s or self.current_s <= 0:
            nxt = self.initial_s
        else:
            nxt = min(self.max_s, self.current_s * 2)
        return Backoff(self.initial_s, self.max_s, self.reset_after_s, nxt)
