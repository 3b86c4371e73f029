"""The memory.high decisions for reclaimed pods, as pure functions: the node's memory PSI and
the reclaimed pods' memory use in, each pod cgroup's ``memory.high`` out.

Why ``memory.high`` and not ``memory.max``: past ``memory.high`` the kernel reclaims the
cgroup's pages and throttles its allocations, it never OOM-kills it; so lowering it on the
reclaimed pods when the node is short of memory makes the kernel take their pages first
and leaves the shared pods' alone (what transparent memory offloading does with memory
PSI). The reclaimed pods run slower, not dead, and get their memory back when the pressure
is gone.

Like the CPU controller (agent.advisor.controller): hysteresis (over = the interval's
memory PSI "some" share above ``psi_threshold``, calm = under ``calm_fraction`` of it, a
sample between neither counts nor breaks a calm run), confirmation (``confirm`` over
samples in a row), steps (each lowering sets ``factor`` x the lower of the pod's
memory.current and its high now, never under the floor: ``floor_bytes`` or the pod's own),
a cool-down per direction, and backing down slower than going in: after ``relax_after``
calm samples the high doubles per step and is lifted (the cgroup's own value back) once it
reaches the memory the pod used when the squeeze began. No I/O and no clock: the sample
carries its time, so a recorded trace replays to the same decisions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["MemTuning", "MemPod", "MemSample", "MemState", "MemDecision", "decide_memory", "MEM_ACTIONS"]

#: every action a memory decision can name
MEM_ACTIONS = ("hold", "lower", "raise", "lift")

MiB = 1 << 20


@dataclass(frozen=True)
class MemTuning:
    #: memory PSI "some" share of an interval (0..1) above which the node is under memory pressure
    psi_threshold: float = 0.10
    #: calm = the share under this fraction of the threshold
    calm_fraction: float = 0.25
    #: over samples in a row before lowering
    confirm: int = 2
    #: calm samples in a row before raising
    relax_after: int = 10
    lower_cooldown_s: float = 5.0
    raise_cooldown_s: float = 10.0
    #: each lowering: this fraction of the pod's memory.current (or of its high, if lower)
    factor: float = 0.8
    #: no pod's memory.high goes below this (nor below the pod's own floor)
    floor_bytes: int = 64 * MiB

    def validate(self) -> None:
        if not 0 < self.psi_threshold < 1:
            raise ValueError("memory_high_psi must be in (0, 1): a share of the interval stalled on memory")
        if not 0 < self.calm_fraction < 1:
            raise ValueError("memory_high_calm_fraction must be in (0, 1)")
        if not 0 < self.factor < 1:
            raise ValueError("memory_high_factor must be in (0, 1)")
        if self.confirm < 1 or self.relax_after < 1:
            raise ValueError("memory_high_confirm and memory_high_relax_after must be >= 1")
        if self.floor_bytes < 0:
            raise ValueError("memory_high_floor_bytes must be >= 0")
        if self.lower_cooldown_s < 0 or self.raise_cooldown_s < 0:
            raise ValueError("memory_high_lower_cooldown_s and memory_high_raise_cooldown_s must be >= 0")


@dataclass(frozen=True)
class MemPod:
    #: memory.current of the pod cgroup (bytes)
    current: int
    #: the pod's own floor (its memory requests, bytes; 0: none known)
    floor: int = 0


@dataclass(frozen=True)
class MemSample:
    at: float
    #: share of the interval some task stalled on memory (growth of the "some" total); None: unknown
    some: float | None
    #: the same for "full" (recorded)
    full: float | None
    #: the kernel's own 10 s average of "some" (0..1): the signal when the interval's share is unknown
    some_avg10: float | None
    #: the reclaimed pods' cgroups now
    pods: dict[str, MemPod] = field(default_factory=dict)


@dataclass(frozen=True)
class MemState:
    #: pod cgroup -> memory.high the advisor set (bytes); a pod absent is not lowered
    highs: dict[str, int] = field(default_factory=dict)
    #: pod cgroup -> memory.current when its first lowering began: raising past it lifts the high
    start: dict[str, int] = field(default_factory=dict)
    over: int = 0
    calm: int = 0
    last_lower: float = -math.inf
    last_raise: float = -math.inf

    def to_json(self) -> dict[str, Any]:
        return {"highs": dict(self.highs), "start": dict(self.start)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MemState:
        """A saved state: the highs in effect carry over (written again at start); counts and
        times restart. Anything malformed: a fresh state."""
        highs, start = d.get("highs"), d.get("start")
        if not isinstance(highs, dict) or not isinstance(start, dict):
            return cls()
        if not all(isinstance(v, int) and v > 0 for v in (*highs.values(), *start.values())):
            return cls()
        return cls(highs={str(k): v for k, v in highs.items() if k in start},
                   start={str(k): v for k, v in start.items() if k in highs})


@dataclass(frozen=True)
class MemDecision:
    at: float
    action: str
    reason: str
    state: MemState
    sample: MemSample
    threshold: float

    def record(self) -> dict[str, Any]:
        """The decisions log's ``memory`` part: inputs, threshold, output."""
        s = self.sample
        return {"action": self.action, "reason": self.reason, "threshold": self.threshold,
                "inputs": {"psi_some": _r(s.some), "psi_full": _r(s.full), "psi_some_avg10": _r(s.some_avg10),
                           "pods": {k: p.current for k, p in sorted(s.pods.items())}},
                "highs": dict(sorted(self.state.highs.items()))}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def _mib(b: int) -> str:
    return f"{b / MiB:.0f}MiB"


def decide_memory(st: MemState, s: MemSample, t: MemTuning) -> MemDecision:
    """The next memory decision. Pure: the same state, sample and tuning give the same answer."""
    now = s.at
    # a pod no longer reclaimed (or gone) is forgotten: its writer puts its own value back
    highs = {k: v for k, v in st.highs.items() if k in s.pods}
    start = {k: v for k, v in st.start.items() if k in highs}
    sig = s.some if s.some is not None else s.some_avg10
    over_now = sig is not None and sig > t.psi_threshold
    calm_now = sig is None or sig < t.calm_fraction * t.psi_threshold
    over = st.over + 1 if over_now else 0
    calm = st.calm + 1 if calm_now else (0 if over_now else st.calm)
    st = replace(st, highs=highs, start=start, over=over, calm=calm)
    shown = "-" if sig is None else f"{sig:.3f}"

    def out(action: str, reason: str, nst: MemState) -> MemDecision:
        return MemDecision(now, action, reason, nst, s, t.psi_threshold)

    if over >= t.confirm:
        if now - st.last_lower < t.lower_cooldown_s:
            return out("hold", "memory pressure; lowering cooling down", st)
        new_h, new_s, moved = dict(highs), dict(start), []
        for pod, p in sorted(s.pods.items()):
            floor = max(t.floor_bytes, p.floor)
            base = min(p.current, highs.get(pod, p.current))
            want = max(floor, int(base * t.factor))
            if want < highs.get(pod, p.current):
                new_h[pod] = want
                new_s.setdefault(pod, p.current)
                moved.append(f"{pod} {_mib(want)}")
        if not moved:
            return out("hold", f"memory PSI some {shown} > {t.psi_threshold:g}, but every reclaimed pod is at "
                       "its floor (or has none to lower)", st)
        return out("lower", f"memory PSI some {shown} > {t.psi_threshold:g} for {over} samples: reclaimed pods' "
                   f"memory.high lowered ({', '.join(moved)})",
                   replace(st, highs=new_h, start=new_s, last_lower=now))
    if calm >= t.relax_after and highs:
        if now - max(st.last_lower, st.last_raise) < t.raise_cooldown_s:
            return out("hold", "calm; raising cooling down", st)
        new_h, new_s = {}, {}
        for pod, h in highs.items():
            up = 2 * h
            if up < start.get(pod, 0):
                new_h[pod], new_s[pod] = up, start[pod]
        action = "raise" if new_h else "lift"
        what = ", ".join(f"{k} {_mib(v)}" for k, v in sorted(new_h.items())) or "every pod's own value back"
        return out(action, f"memory PSI some {shown} under {t.calm_fraction * t.psi_threshold:g} for {calm} "
                   f"samples: reclaimed pods' memory.high raised ({what})",
                   replace(st, highs=new_h, start=new_s, last_raise=now, calm=0))
    return out("hold", "no memory pressure" if not over_now else "memory pressure; confirming", st)
