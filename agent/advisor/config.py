"""The [advisor] config section: on/off, the delay target and the controller's tuning."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agent.advisor.controller import Tuning
from agent.advisor.memcontrol import MemTuning
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
    # -- memory.high of reclaimed pods under memory pressure (agent.advisor.memcontrol; cgroup v2 only)
    #: off by default; on cgroup v1 it is inert (logged and shown by status), v1 has no memory.high
    memory_high: bool = False
    #: memory PSI "some" share of an interval above which the node is under memory pressure
    memory_high_psi: float = MemTuning.psi_threshold
    memory_high_calm_fraction: float = MemTuning.calm_fraction
    memory_high_confirm: int = MemTuning.confirm
    memory_high_relax_after: int = MemTuning.relax_after
    memory_high_lower_cooldown_s: float = MemTuning.lower_cooldown_s
    memory_high_raise_cooldown_s: float = MemTuning.raise_cooldown_s
    #: each lowering sets memory.high to this fraction of the pod's memory.current
    memory_high_factor: float = MemTuning.factor
    #: no reclaimed pod's memory.high goes below this
    memory_high_floor_bytes: int = MemTuning.floor_bytes

    def tuning(self) -> Tuning:
        names = {f.name for f in dataclasses.fields(Tuning)}
        return Tuning(**{k: getattr(self, k) for k in names})

    def memory_tuning(self) -> MemTuning:
        return MemTuning(psi_threshold=self.memory_high_psi, calm_fraction=self.memory_high_calm_fraction,
                         confirm=self.memory_high_confirm, relax_after=self.memory_high_relax_after,
                         lower_cooldown_s=self.memory_high_lower_cooldown_s,
                         raise_cooldown_s=self.memory_high_raise_cooldown_s, factor=self.memory_high_factor,
                         floor_bytes=self.memory_high_floor_bytes)

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
        self.memory_tuning().validate()


#: [advisor] settings a running advisor takes on SIGHUP (everything but the switch itself)
LIVE_SETTINGS = frozenset(f.name for f in dataclasses.fields(AdvisorConfig)) - {"enabled"}

#: ``config[ADVISOR_SECTION]``, the [advisor] section
ADVISOR_SECTION: SectionKey[AdvisorConfig] = SectionKey("advisor", AdvisorConfig)
