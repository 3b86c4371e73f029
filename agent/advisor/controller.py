"""The advisor's decisions as pure functions: one sample of pressure in, the shared pool's
size, the reclaimed pods' CPU quota and whether eviction may go ahead out.

No I/O and no clock of its own (the sample carries its time), so a recorded trace of
samples replays to the same decisions (tests/unit/advisor/). The response is graduated,
as koordlet's cpusuppress and Katalyst's sys-advisor do it, each step only when the one
before cannot help any more:

1. **grow** the shared pool out of the reclaim pool (never past the CPUs shared pools may
   use: not reserved, not dedicated), when the shared pool's run-queue delay p99 is over
   the target or its CPUs are nearly all used;
2. **suppress** the reclaimed pods: a CFS quota on their cgroups (on top of ``cpu.idle``),
   cut by ``suppress_factor`` per step down to ``quota_floor_cpus``;
3. **evict** (let the pressure engine's eviction go ahead) only when suppression has sat at
   its floor for ``evict_after_s`` without bringing the delay back under the target.

Back down in the reverse order and more slowly: the quota is relaxed (doubled, then lifted)
after ``relax_after`` calm samples with no over sample between them (a sample in the band
between calm and over neither counts nor breaks the run), the shared pool shrinks one CPU at
a time after ``shrink_cooldown_s``. Hysteresis (over = above the target, calm = below
``calm_fraction`` of it), confirmation (``confirm`` samples in a row) and a cool-down per
step keep a noisy or flapping input from moving the pools; a relax that the next samples
undo doubles the wait before the next relax, so a quota that cannot be lifted settles
instead of oscillating.

At the quota floor holding on cannot help any further: there every sample within the target
counts as calm, and when the delay learned there (the floor) is still at least
``calm_fraction`` of the delay that started the suppression, the hold was not the cure (the
delay is the node's own) and the quota is lifted whole rather than doubled. Before this
(issue 26, a bench run under co-tenant load) calm meant p99 under the learned floor itself
and a band sample reset the count, so hogs sat at the floor for whole runs
(tests/unit/advisor/data/recorded_*.json).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["Tuning", "Limits", "Sample", "ControllerState", "Decision", "decide", "ACTIONS"]

#: every action a decision can name
ACTIONS = ("hold", "clamp", "grow", "suppress", "evict", "relax", "shrink")


@dataclass(frozen=True)
class Tuning:
    #: the shared pool's run-queue delay p99 to keep (µs); see docs/advisor.md for its calibration
    target_us: float = 400.0
    #: calm = p99 under this fraction of the target (the hysteresis band is between)
    calm_fraction: float = 0.5
    #: grow when the shared pool's CPUs are used above this share
    usage_high: float = 0.85
    #: shrink only when the pool one CPU smaller would still be used below this share
    usage_low: float = 0.6
    #: over-target samples in a row before acting
    confirm: int = 2
    #: calm samples in a row before backing down
    relax_after: int = 5
    grow_cooldown_s: float = 2.0
    shrink_cooldown_s: float = 30.0
    suppress_cooldown_s: float = 1.0
    relax_cooldown_s: float = 5.0
    #: the longest wait between relaxes a flapping quota backs off to
    relax_cooldown_max_s: float = 60.0
    #: each suppression step multiplies the quota by this
    suppress_factor: float = 0.5
    #: the lowest quota reclaimed pods are held to (CPUs, all of them together)
    quota_floor_cpus: float = 0.1
    #: suppression at its floor this long without the target restored: eviction may go ahead
    evict_after_s: float = 60.0
    #: the target in effect is at least this many times the delay the shared pool has without
    #: the reclaimed pods (learned: ``ControllerState.floor_us``); 0 = the fixed target alone
    floor_factor: float = 2.0
    #: weight of one sample in the learned floor (an exponential average)
    floor_alpha: float = 0.1

    def effective_target(self, floor_us: float | None) -> float:
        """``target_us``, or ``floor_factor`` x the learned floor when that is higher: on a node
        whose own load keeps the shared pods' delay above ``target_us`` with no reclaimed pod
        running, holding the reclaimed pods back cannot reach the fixed target (docs/advisor.md)."""
        if self.floor_factor <= 0 or floor_us is None:
            return self.target_us
        return max(self.target_us, self.floor_factor * floor_us)

    def validate(self) -> None:
        if self.target_us <= 0:
            raise ValueError("target_us must be > 0")
        if not 0 < self.calm_fraction < 1:
            raise ValueError("calm_fraction must be in (0, 1)")
        if not 0 < self.usage_low < self.usage_high <= 1:
            raise ValueError("need 0 < usage_low < usage_high <= 1")
        if self.confirm < 1 or self.relax_after < 1:
            raise ValueError("confirm and relax_after must be >= 1")
        if not 0 < self.suppress_factor < 1:
            raise ValueError("suppress_factor must be in (0, 1)")
        if self.quota_floor_cpus <= 0:
            raise ValueError("quota_floor_cpus must be > 0")
        for name in ("grow_cooldown_s", "shrink_cooldown_s", "suppress_cooldown_s", "relax_cooldown_s",
                     "evict_after_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.relax_cooldown_max_s < self.relax_cooldown_s:
            raise ValueError("relax_cooldown_max_s must be >= relax_cooldown_s")
        if self.floor_factor < 0 or (self.floor_factor and self.floor_factor < 1):
            raise ValueError("floor_factor must be 0 (off) or >= 1")
        if not 0 < self.floor_alpha <= 1:
            raise ValueError("floor_alpha must be in (0, 1]")


@dataclass(frozen=True)
class Limits:
    """What the CPU policy allows now (read each interval: pods come and go)."""

    #: whole CPUs the shared pool's requests need: never below
    shared_min: int
    #: CPUs shared pools may use (not reserved, not dedicated): never above
    shared_max: int
    #: CPUs the reclaim pool holds now (the quota's ceiling)
    reclaim_cpus: int
    #: reclaimed pods may run on CPUs the shared pods run on (the reclaim pool overlaps the
    #: shared pool, or shared pods ramping up on every shared CPU): only then can suppressing
    #: or evicting them help the shared pool's delay
    overlap: bool = True
    #: the CPUs the shared pool's pods request in all (exact): above ``shared_max`` they are
    #: overcommitted, admitted as Katalyst admits shared_cores (agent.cpu.overcommit)
    shared_requests: float = 0.0


@dataclass(frozen=True)
class Sample:
    """One interval's readings."""

    at: float
    #: run-queue delay p99 of the shared pool's containers over the interval (µs); None: none measured
    shared_p99_us: float | None
    #: CPUs the shared pool's containers used over the interval
    shared_usage: float = 0.0
    #: CPUs the reclaimed containers used over the interval
    reclaim_usage: float = 0.0
    #: reclaimed containers running now (nothing to suppress without them)
    reclaimed: int = 0
    #: node PSI cpu "some" share over the interval, where the kernel has it (recorded, not acted on)
    psi_some: float | None = None
    #: per pod: run-queue wait (s/s) over the interval, for the record
    pods: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ControllerState:
    """Everything the controller remembers between samples (persisted by the component)."""

    #: the shared pool's size the advisor set; None: the policy's own (from requests)
    shared_size: int | None = None
    #: CPU quota of the reclaimed pods (all together); None: not suppressed
    quota_cpus: float | None = None
    over: int = 0
    calm: int = 0
    #: samples in a row over the fixed ``target_us`` (or busy): growing the shared pool is judged
    #: against it, not the target the learned floor raises
    grow_over: int = 0
    last_grow: float = -math.inf
    last_shrink: float = -math.inf
    last_suppress: float = -math.inf
    last_relax: float = -math.inf
    #: wait between relaxes now (backs off when a relax is undone)
    relax_wait_s: float = 0.0
    #: since when suppression (or, with nothing to suppress, the largest pool) has not been enough
    floor_since: float | None = None
    #: the shared pool's delay p99 without the reclaimed pods (none running, or held to the
    #: quota floor, or on other CPUs): an exponential average, µs
    floor_us: float | None = None
    #: the p99 that started the suppression in effect (µs): a hold that does not bring the
    #: delay well under it was not the cure
    suppress_p99: float | None = None
    #: the last ``WINDOW`` p99 samples (µs), all of them: what "the delay before" means
    recent: tuple[float, ...] = ()
    #: the last ``WINDOW`` p99 samples the floor may learn from (no reclaimed pod adding to them)
    floor_window: tuple[float, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            out[k] = None if isinstance(v, float) and math.isinf(v) else v
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ControllerState:
        """A saved state; unknown keys are ignored, times reset (a restart's clock differs),
        so only the outputs (size, quota), the flap back-off and the learned floor carry over."""
        size = d.get("shared_size")
        quota = d.get("quota_cpus")
        floor = d.get("floor_us")
        return cls(
            shared_size=int(size) if isinstance(size, int) and size > 0 else None,
            quota_cpus=float(quota) if isinstance(quota, (int, float)) and quota > 0 else None,
            relax_wait_s=float(d.get("relax_wait_s") or 0.0),
            floor_us=float(floor) if isinstance(floor, (int, float)) and floor > 0 else None,
        )


@dataclass(frozen=True)
class Decision:
    at: float
    action: str
    reason: str
    shared_size: int
    quota_cpus: float | None
    #: the pressure engine's eviction may go ahead now
    evict: bool
    state: ControllerState
    sample: Sample
    limits: Limits
    target_us: float

    @property
    def changed(self) -> bool:
        return self.action not in ("hold",)

    def record(self) -> dict[str, Any]:
        """The decisions log's line: inputs, target, state and output."""
        s = self.sample
        return {
            "at": round(self.at, 3), "action": self.action, "reason": self.reason,
            "shared_size": self.shared_size, "quota_cpus": _r(self.quota_cpus), "evict": self.evict,
            "target_us": self.target_us,
            "inputs": {"shared_p99_us": _r(s.shared_p99_us), "shared_usage": _r(s.shared_usage),
                       "reclaim_usage": _r(s.reclaim_usage), "reclaimed": s.reclaimed, "psi_some": _r(s.psi_some),
                       "pods": {k: _r(v) for k, v in sorted(s.pods.items())}},
            "limits": {"shared_min": self.limits.shared_min, "shared_max": self.limits.shared_max,
                       "reclaim_cpus": self.limits.reclaim_cpus, "overlap": self.limits.overlap,
                       "shared_requests": _r(self.limits.shared_requests)},
            "state": self.state.to_json(),
        }


#: p99 samples kept for medians (the delay before a suppression, the floor's input)
WINDOW = 5
#: eligible samples before the floor is learned at all
MIN_FLOOR = 3


def _median(xs: tuple[float, ...]) -> float:
    v = sorted(xs)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


#: reclaimed pods using (or held to) at most this many times ``quota_floor_cpus`` are "at the
#: floor": the shared pool's delay then is the node's own (the floor is learned there), and the
#: last halving step may stop just above the floor itself
HELD = 1.5


def _held(quota: float | None, lim: Limits, t: Tuning) -> bool:
    """The reclaimed pods are held at (or just above) the quota floor."""
    return quota is not None and quota <= HELD * min(t.quota_floor_cpus, float(max(lim.reclaim_cpus, 1))) + 1e-9


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def decide(st: ControllerState, s: Sample, lim: Limits, t: Tuning) -> Decision:
    """The next decision. Pure: the same state, sample, limits and tuning give the same answer."""
    now = s.at
    lo = max(0, min(lim.shared_min, lim.shared_max))
    size = st.shared_size if st.shared_size is not None else lo
    clamped = max(lo, min(size, lim.shared_max))
    quota = st.quota_cpus
    if quota is not None and s.reclaimed == 0:
        quota = None  # nobody to hold back: a new reclaimed pod starts unsuppressed
    p99 = s.shared_p99_us
    floor_us, fwin, recent = st.floor_us, st.floor_window, st.recent
    if p99 is not None:
        recent = (*recent, p99)[-WINDOW:]
    if p99 is not None and (s.reclaimed == 0 or not lim.overlap or s.reclaim_usage <= HELD * t.quota_floor_cpus):
        # the floor learns from the median of the last few eligible samples, and only once there
        # are MIN_FLOOR of them: a per-second p99 is one wake-up in a hundred, and one spike
        # seeding the average would raise the target for a minute (issue 26, round 2)
        fwin = (*fwin, p99)[-WINDOW:]
        if len(fwin) >= MIN_FLOOR:
            m = _median(fwin)
            floor_us = m if floor_us is None else (1 - t.floor_alpha) * floor_us + t.floor_alpha * m
    base = t.target_us
    target = t.effective_target(floor_us)
    t = replace(t, target_us=target)  # the target in effect, for every step below
    delay_over = p99 is not None and p99 > t.target_us
    busy = clamped > 0 and s.shared_usage > t.usage_high * clamped
    at_floor = _held(quota, lim, t)
    # at the quota floor any sample within the target is calm: holding on cannot help further
    calm_now = (p99 is None or p99 < t.target_us * t.calm_fraction or (at_floor and not delay_over)) and not busy
    over = st.over + 1 if (delay_over or busy) else 0
    over_base = p99 is not None and p99 > base
    grow_over = st.grow_over + 1 if (over_base or busy) else 0
    # hysteresis: a sample in the band between calm and over neither counts nor breaks a calm run
    calm = st.calm + 1 if calm_now else (0 if (delay_over or busy) else st.calm)
    st = replace(st, over=over, calm=calm, grow_over=grow_over, shared_size=clamped if st.shared_size is not None or clamped != lo else None,
                 quota_cpus=quota, floor_us=floor_us, suppress_p99=st.suppress_p99 if quota is not None else None,
                 recent=recent, floor_window=fwin)

    def out(action: str, reason: str, nst: ControllerState, evict: bool = False) -> Decision:
        return Decision(now, action, reason, nst.shared_size if nst.shared_size is not None else clamped,
                        nst.quota_cpus, evict, nst, s, lim, t.target_us)

    if quota is not None and not lim.overlap and now - max(st.last_suppress, st.last_relax) >= t.relax_cooldown_s:
        return out("relax", "no reclaimed pod runs on the shared pool's cpus any more: quota lifted",
                   replace(st, quota_cpus=None, last_relax=now, floor_since=None, suppress_p99=None))
    if calm >= t.confirm and st.floor_since is not None:
        st = replace(st, floor_since=None)  # the target is back: the eviction clock stops
    if over >= t.confirm:
        return _respond(st, s, lim, t, clamped, delay_over, out)
    if grow_over >= t.confirm and clamped < lim.shared_max and now - st.last_grow >= t.grow_cooldown_s:
        # the learned floor raises the bar for holding reclaimed pods back (their cost), not for
        # giving the shared pods CPUs out of the reclaim pool: a hold taken while the shared pods
        # ramped up (no pool to grow yet) learned a floor on too few CPUs (issue 26, round 2)
        new = min(lim.shared_max, clamped + max(1, clamped // 4))
        assert p99 is not None or busy
        why = f"p99 {p99:.0f}us > target_us {base:.0f}us" if over_base and p99 is not None else \
            f"shared pool {s.shared_usage:.2f}/{clamped} cpus used"
        return out("grow", f"{why}: shared pool {clamped} -> {new} cpus from the reclaim pool",
                   replace(st, shared_size=new, last_grow=now, calm=0))
    if calm >= t.relax_after:
        d = _back_down(st, s, lim, t, clamped, lo, out, over_base)
        if d is not None:
            return d
    if clamped != size and st.shared_size is not None:
        return out("clamp", f"shared pool size {size} outside [{lo}, {lim.shared_max}] the policy allows now: "
                   f"{clamped}", st)
    return out("hold", "within target" if not (delay_over or busy) else "confirming", st)


Out = Callable[..., Decision]


def _respond(st: ControllerState, s: Sample, lim: Limits, t: Tuning, clamped: int, delay_over: bool,
             out: Out) -> Decision:
    """Over the target (or busy) for ``confirm`` samples: grow, else suppress, else (after
    ``evict_after_s`` at the floor) allow eviction."""
    now, p99, quota = s.at, s.shared_p99_us, st.quota_cpus
    if clamped < lim.shared_max and now - st.last_grow >= t.grow_cooldown_s:
        step = max(1, clamped // 4)
        new = min(lim.shared_max, clamped + step)
        why = f"p99 {p99:.0f}us > target {t.target_us:.0f}us" if delay_over else \
            f"shared pool {s.shared_usage:.2f}/{clamped} cpus used"
        return out("grow", f"{why}: shared pool {clamped} -> {new} cpus from the reclaim pool",
                   replace(st, shared_size=new, last_grow=now, calm=0))
    if not delay_over:
        return out("hold", "shared pool busy but at its largest; its delay is within the target", st)
    assert p99 is not None
    if not lim.overlap:
        return out("hold", f"p99 {p99:.0f}us > target {t.target_us:.0f}us, but no reclaimed pod runs on the shared "
                   "pool's cpus: suppressing or evicting them would not help", replace(st, floor_since=None))
    floor = min(t.quota_floor_cpus, float(max(lim.reclaim_cpus, 1)))
    if s.reclaimed and (quota is None or quota > floor):
        if now - st.last_suppress < t.suppress_cooldown_s:
            return out("hold", "suppression cooling down", st)
        base = quota if quota is not None else max(s.reclaim_usage, floor, 0.0) or float(lim.reclaim_cpus)
        base = min(base, float(max(lim.reclaim_cpus, 1)))
        new_q = max(floor, round(base * t.suppress_factor, 4))
        wait = st.relax_wait_s or t.relax_cooldown_s
        if now - st.last_relax < max(wait, t.relax_cooldown_s) * 2:
            wait = min(t.relax_cooldown_max_s, wait * 2)  # the last relax was undone: relax later
        nst = replace(st, quota_cpus=new_q, last_suppress=now, relax_wait_s=wait,
                      floor_since=now if new_q <= floor and st.floor_since is None else st.floor_since,
                      suppress_p99=(_median(st.recent) if st.recent else p99) if quota is None or st.suppress_p99 is None
                      else st.suppress_p99)
        return out("suppress", f"p99 {p99:.0f}us > target {t.target_us:.0f}us with the shared pool at "
                   f"{clamped}/{lim.shared_max} cpus: reclaimed pods held to {new_q:g} cpus", nst)
    since = st.floor_since if st.floor_since is not None else now
    st = replace(st, floor_since=since)
    if now - since >= t.evict_after_s:
        what = f"suppression at its floor ({floor:g} cpus)" if s.reclaimed else "no reclaimed pod to suppress"
        return out("evict", f"p99 {p99:.0f}us > target {t.target_us:.0f}us for {now - since:.0f}s with "
                   f"{what} and the shared pool at its largest: eviction may go ahead",
                   replace(st, floor_since=now), evict=True)
    return out("hold", f"p99 {p99:.0f}us > target; eviction allowed after {t.evict_after_s:g}s at the floor "
               f"({now - since:.0f}s so far)", st)


def _back_down(st: ControllerState, s: Sample, lim: Limits, t: Tuning, clamped: int, lo: int,
               out: Out, over_base: bool = False) -> Decision | None:
    """Calm for ``relax_after`` samples: relax the quota first, then shrink the shared pool."""
    now, quota, calm = s.at, st.quota_cpus, st.calm
    wait = max(st.relax_wait_s, t.relax_cooldown_s)
    if quota is not None:
        if now - max(st.last_relax, st.last_suppress) < wait:
            return out("hold", "calm; relax cooling down", st)
        held = _held(quota, lim, t)
        started, learned = st.suppress_p99, st.floor_us
        if held and started is not None and learned is not None \
                and learned >= t.calm_fraction * started:
            return out("relax", f"the hold did not help: p99 {learned:.0f}us with reclaimed pods at the floor "
                       f"({quota:g} cpus), {started:.0f}us when it started: the delay is the node's own, "
                       "quota lifted",
                       replace(st, quota_cpus=None, last_relax=now, calm=0, floor_since=None, suppress_p99=None))
        new_q2: float | None = round(quota * 2, 4)
        if new_q2 is not None and new_q2 >= lim.reclaim_cpus:
            new_q2 = None
        why = "within the target at the quota floor" if held else \
            f"p99 under {t.calm_fraction:g}x target"
        return out("relax", f"{why} for {calm} samples: reclaimed quota "
                   f"{quota:g} -> {'none' if new_q2 is None else f'{new_q2:g}'} cpus",
                   replace(st, quota_cpus=new_q2, last_relax=now, calm=0, floor_since=None,
                           suppress_p99=st.suppress_p99 if new_q2 is not None else None))
    smaller = clamped - 1
    if clamped > lo and smaller >= 1 and s.shared_usage < t.usage_low * smaller and not over_base \
            and now - max(st.last_shrink, st.last_grow) >= t.shrink_cooldown_s:
        new_size = smaller if smaller > lo else None
        return out("shrink", f"calm for {calm} samples, shared pool {s.shared_usage:.2f}/{clamped} cpus used: "
                   f"{clamped} -> {smaller} cpus back to the reclaim pool",
                   replace(st, shared_size=new_size, last_shrink=now, calm=0))
    return None
