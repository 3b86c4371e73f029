"""The [advisor] config section: on/off, the delay target and the controller's tuning."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agent.advisor.controller import Tuning
from agent.config import SectionKey

__all__ = ["ADVISOR_SECTION", "AdvisorConfig", "LIVE_SETTINGS"]


@dataclass(frozen=True)
class AdvisorConfig:
    #: off: the pools are sized from requests and pressure evicts on its own thresholds (as before)
    enabled: bool = False
    #: seconds between decisions (at most 1: the issue's bound)
    interval_s: float = 1.0
    #: kept decisions: decisions.jsonl is rotated to decisions.jsonl.1 beyond this many lines
    decisions_keep: int = 5000
    #: a "hold" is written to the log at most this often (every change is written)
    hold_record_s: float = 10.0
    #: the shared pool's p99 is taken over this many intervals' wake-ups (a decision still
    #: comes every interval): a per-second p99 of a pod waking a few hundred times is noise
    signal_window: int = 3
    # -- the controller (agent.advisor.controller.Tuning; docs/advisor.md)
    target_us: float = Tuning.target_us
    calm_fraction: float = Tuning.calm_fraction
    usage_high: float = Tuning.usage_high
    usage_low: float = Tuning.usage_low
    confirm: int = Tuning.confirm
    relax_after: int = Tuning.relax_after
    grow_cooldown_s: float = Tuning.grow_cooldown_s
    shrink_cooldown_s: float = Tuning.shrink_cooldown_s
    suppress_cooldown_s: float = Tuning.suppress_cooldown_s
    relax_cooldown_s: float = Tuning.relax_cooldown_s
    relax_cooldown_max_s: float = Tuning.relax_cooldown_max_s
    suppress_factor: float = Tuning.suppress_factor
    quota_floor_cpus: float = Tuning.quota_floor_cpus
    evict_after_s: float = Tuning.evict_after_s
    floor_factor: float = Tuning.floor_factor
    floor_alpha: float = Tuning.floor_alpha

    def tuning(self) -> Tuning:
        names = {f.name for f in dataclasses.fields(Tuning)}
        return Tuning(**{k: getattr(self, k) for k in names})

    def validate(self) -> None:
        if not 0 < self.interval_s <= 1.0:
            raise ValueError("interval_s must be in (0, 1]")
        if self.decisions_keep < 10:
            raise ValueError("decisions_keep must be >= 10")
        if self.signal_window < 1:
            raise ValueError("signal_window must be >= 1")
        if self.hold_record_s < 0:
            raise ValueError("hold_record_s must be >= 0")
        self.tuning().validate()


#: [advisor] settings a running advisor takes on SIGHUP (everything but the switch itself)
LIVE_SETTINGS = frozenset(f.name for f in dataclasses.fields(AdvisorConfig)) - {"enabled"}

#: ``config[ADVISOR_SECTION]``, the [advisor] section
ADVISOR_SECTION: SectionKey[AdvisorConfig] = SectionKey("advisor", AdvisorConfig)
