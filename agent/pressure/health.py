"""Device health from error counters: over a threshold within a window -> unhealthy,
healthy again after a quiet period. Pure state; the driver below pushes changes
to the device-health board (``DEVICE_HEALTH`` in ``agent.contracts``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.eventlog import get_logger

log = get_logger("hwagent.pressure")

__all__ = ["HealthPolicy", "HealthChange", "HealthTracker", "HealthBoard", "HealthDriver"]

DeviceKey = tuple[str, str]  # (kind, key): ("block", "7:0"), ("net", "eth0"), ("pci", "0000:3b:00.0")


@dataclass(frozen=True)
class HealthPolicy:
    threshold: int = 1
    window_s: float = 60.0
    recovery_s: float = 300.0


@dataclass(frozen=True)
class HealthChange:
    kind: str
    key: str
    healthy: bool
    reason: str
    at: float


@dataclass
class _Dev:
    events: deque = field(default_factory=deque)  # (t, n)
    last_error: float = -1e18
    unhealthy: bool = False
    reason: str = ""


class HealthTracker:
    """Feed cumulative error counters; get transitions.

    The first reading of a counter is a baseline (errors before the agent looked
    are history, not news) unless ``count_first`` is set, which suits counters
    that start at zero when the probe loads.
    """

    def __init__(self, policy: HealthPolicy) -> None:
        self.policy = policy
        self._last: dict[tuple[DeviceKey, str], int] = {}
        self._devs: dict[DeviceKey, _Dev] = {}

    def observe(
        self, now: float, dev: DeviceKey, counter: str, value: int, what: str, count_first: bool = False
    ) -> None:
        """``counter`` names the signal (e.g. "io_error"), ``what`` describes it for the reason."""
        prev = self._last.get((dev, counter))
        self._last[(dev, counter)] = value
        if prev is None:
            if not count_first or value <= 0:
                return
            prev = 0
        grown = value - prev
        if grown <= 0:
            return
        d = self._devs.setdefault(dev, _Dev())
        d.events.append((now, grown))
        d.last_error = now
        d.reason = f"{grown} {what}"

    def tick(self, now: float) -> list[HealthChange]:
        out = []
        p = self.policy
        for dev, d in self._devs.items():
            while d.events and d.events[0][0] < now - p.window_s:
                d.events.popleft()
            recent = sum(n for _, n in d.events)
            if not d.unhealthy and recent >= p.threshold:
                d.unhealthy = True
                reason = f"{recent} errors in {p.window_s:g}s (latest: {d.reason})"
                out.append(HealthChange(dev[0], dev[1], False, reason, now))
            elif d.unhealthy and now - d.last_error >= p.recovery_s:
                d.unhealthy = False
                # the errors it recovered from are history: counted again while still in the window,
                # they flipped it unhealthy on the next tick (recovery_s < window_s)
                d.events.clear()
                out.append(HealthChange(dev[0], dev[1], True, f"no errors for {p.recovery_s:g}s", now))
        return out

    def unhealthy(self) -> dict[DeviceKey, str]:
        return {k: d.reason for k, d in self._devs.items() if d.unhealthy}


class HealthBoard(Protocol):
    def set_health_for(self, kind: str, key: str, healthy: bool, reason: str, source: str) -> list[str]: ...


class HealthDriver:
    """Pushes tracker transitions to the board; keeps the last state for metrics."""

    def __init__(
        self,
        tracker: HealthTracker,
        board: HealthBoard | Callable[[], HealthBoard | None] | None,
        source: str = "hwagent-probes",
    ) -> None:
        """``board`` may be a provider, looked up per change: the board's owner may start later."""
        self.tracker = tracker
        self._board = board
        self.source = source
        self.state: dict[DeviceKey, bool] = {}
        self.history: deque[HealthChange] = deque(maxlen=200)

    @property
    def board(self) -> HealthBoard | None:
        b = self._board
        return b if b is None or hasattr(b, "set_health_for") else b()

    def apply(self, changes: list[HealthChange]) -> None:
        for c in changes:
            self.state[(c.kind, c.key)] = c.healthy
            self.history.append(c)
            affected: Any = []
            board = self.board
            if board is not None:
                try:
                    affected = board.set_health_for(c.kind, c.key, c.healthy, c.reason, self.source)
                except Exception as e:  # a broken board must not stop the probes
                    log.error("device health push failed", kind=c.kind, key=c.key, error=repr(e))
            log.warning(
                "device health", kind=c.kind, key=c.key, healthy=c.healthy, reason=c.reason,
                devices=",".join(affected or []) or "-",
            )

    def update(
        self,
        now: float,
        readings: Mapping[DeviceKey, Mapping[str, tuple[int, str]]],
        since_boot: Mapping[DeviceKey, Mapping[str, tuple[int, str]]] | None = None,
    ) -> list[HealthChange]:
        """``decide`` and ``apply`` in one step, on the caller's thread."""
        changes = self.decide(now, readings, since_boot)
        self.apply(changes)
        return changes

    def decide(
        self,
        now: float,
        readings: Mapping[DeviceKey, Mapping[str, tuple[int, str]]],
        since_boot: Mapping[DeviceKey, Mapping[str, tuple[int, str]]] | None = None,
    ) -> list[HealthChange]:
        """device -> counter -> (cumulative value, description) -> the transitions.

        Only the tracker changes, so this may run off the board owner's thread;
        ``apply`` pushes the transitions and must run on it.
        ``readings`` are counters that started at zero with the agent (BPF maps);
        ``since_boot`` ones (sysfs) take their first value as a baseline.
        """
        for group, count_first in ((readings, True), (since_boot or {}, False)):
            for dev, counters in group.items():
                for counter, (value, what) in counters.items():
                    self.tracker.observe(now, dev, counter, value, what, count_first)
        return self.tracker.tick(now)
