"""The [pressure] config section: which probes run, health and eviction thresholds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from agent.config import SectionKey

ALL_PROBES = ("runqlat", "blockio", "netdev", "iommu", "thermal", "irq")


@dataclass(frozen=True)
class PressureConfig:
    OBSOLETE_KEYS: ClassVar[Mapping[str, str]] = {
        "max_tasks": "the run-queue probe keeps its per-task stamp in task-local storage, which needs no size",
    }

    enabled: bool = True
    #: seconds between readings (and decisions)
    interval_s: float = 1.0

    # -- probes: each can be switched off; off or unavailable means its fallback runs
    runqlat: bool = True
    blockio: bool = True
    netdev: bool = True
    iommu: bool = True
    thermal: bool = True
    irq: bool = True
    max_cgroups: int = 4096
    btf_path: str = "/sys/kernel/btf/vmlinux"
    #: directory with the BPF C sources; empty = probes/ of the installation
    probes_dir: str = ""
    #: label cardinality bound: the N cgroups with most delay get their own series
    top_cgroups: int = 20
    #: cap on per-container series (labelled namespace/pod/container): the N with most delay, the rest as pod="other"
    max_container_series: int = 100

    # -- device health
    health_enabled: bool = True
    #: errors (block I/O errors, TX errors/timeouts, IOMMU faults) within the window
    error_threshold: int = 1
    error_window_s: float = 60.0
    #: error-free time before an unhealthy device is reported healthy again
    recovery_s: float = 300.0
    #: hard-IRQ rate that counts as a storm (reported, not acted on)
    irq_storm_per_s: float = 50000.0

    # -- CPU pressure and eviction
    eviction_enabled: bool = True
    #: pool pressure = run-queue wait (s/s) of the pool's containers per CPU of the pool
    soft_threshold: float = 0.5
    hard_threshold: float = 1.0
    window_s: float = 3.0
    #: fraction of the window's samples that must be over a threshold
    met_fraction: float = 0.6
    cooldown_s: float = 30.0
    #: node PSI cpu "some" (share of time) needed to confirm; 0 disables the check
    psi_confirm: float = 0.05
    #: kubelet mode: a command run per eviction (env HWAGENT_EVICT_*); empty = none
    eviction_hook: str = ""

    def enabled_probes(self) -> list[str]:
        return [p for p in ALL_PROBES if getattr(self, p)]

    def validate(self) -> None:
        if self.interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        if not 0 < self.soft_threshold <= self.hard_threshold:
            raise ValueError("need 0 < soft_threshold <= hard_threshold")
        if self.window_s < self.interval_s:
            raise ValueError("window_s must be at least interval_s")
        if not 0 < self.met_fraction <= 1:
            raise ValueError("met_fraction must be in (0, 1]")
        if self.error_threshold < 1:
            raise ValueError("error_threshold must be >= 1")
        for name in ("error_window_s", "recovery_s", "cooldown_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.max_cgroups < 2:
            raise ValueError("max_cgroups must be >= 2")
        if self.max_container_series < 1:
            raise ValueError("max_container_series must be >= 1")
        if self.top_cgroups < 1:
            raise ValueError("top_cgroups must be >= 1")


#: ``config[PRESSURE_SECTION]``, the [pressure] section
PRESSURE_SECTION: SectionKey[PressureConfig] = SectionKey("pressure", PressureConfig)
