"""The [cpu] config section."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from agent.cpuset import CPUSet, CPUSetError
from agent.config import SectionKey

__all__ = ["CPU_SECTION", "CPUConfig", "RECLAIM_MIN_AUTO_CAP", "reclaim_min_for"]

#: what "auto" gives a machine with CPUs to spare: upstream's reservedReclaimedCPUsSize
RECLAIM_MIN_AUTO_CAP = 4


@dataclass(frozen=True)
class CPUConfig:
    enabled: bool = True
    #: number of reserved CPUs, one hyperthread per NUMA node round-robin
    reserved_cpus: int = 0
    #: explicit reserved list ("0,2"); wins over reserved_cpus when set
    reserved_cpu_list: str = ""
    #: smallest size of the reclaim pool (upstream reservedReclaimedCPUsSize, 4);
    #: "auto" = 4, or the online CPUs not reserved when fewer, resolved at start
    reclaim_min_cpus: int | Literal["auto"] = "auto"
    #: false (upstream default): idle CPUs beyond reclaim_min_cpus go to shared pools
    enable_reclaim: bool = False
    #: how long a new shared container runs on all shared CPUs before joining its pool
    transition_period_s: float = 30.0
    #: any of these annotation keys marks a debug pod (no cpuset change)
    debug_annotation_keys: list[str] = field(default_factory=list)
    #: enhancement values assumed when a pod does not set them, e.g. {numa_exclusive = "true"}
    enhancement_defaults: dict[str, str] = field(default_factory=dict)
    #: TakeByTopology keeps a container inside one last-level cache when it can
    align_l3: bool = True
    #: start empty (keeping the bad file aside) when the checkpoint is corrupt
    accept_state_loss: bool = False
    #: pods absent from the active-pods source this long are forgotten
    residual_cleanup_s: float = 300.0
    residual_check_interval_s: float = 30.0
    #: write cpusets into container cgroups (hwagent's addition to upstream)
    enforce_cgroups: bool = True
    cpuset_check_interval_s: float = 10.0
    #: rewrite a cpuset someone else changed (upstream only reports)
    repair_drift: bool = True
    #: keep cpu.idle of the reclaimed root cgroup at cpu_idle
    sync_cpu_idle: bool = False
    cpu_idle: bool = True
    cpu_idle_interval_s: float = 30.0
    socket_name: str = "qrm_cpu_plugin_dynamic.sock"
    #: what a NUMA-bound dedicated pod takes out of the shared pools: its CPUs
    #: ("exclusive-cores") or its whole NUMA node ("whole-node", Katalyst's rule);
    #: "auto" = exclusive-cores standalone, whole-node in kubelet mode, resolved at start
    dedicated_numa: Literal["auto", "exclusive-cores", "whole-node"] = "auto"

    def validate(self) -> None:
        if self.reserved_cpus < 0:
            raise ValueError("reserved_cpus must be >= 0")
        if self.reserved_cpu_list:
            try:
                CPUSet.parse(self.reserved_cpu_list)
            except CPUSetError as e:
                raise ValueError(f"reserved_cpu_list: {e}") from None
        if self.reclaim_min_cpus != "auto" and self.reclaim_min_cpus < 0:
            raise ValueError('reclaim_min_cpus must be >= 0 or "auto"')
        for name in ("transition_period_s", "residual_cleanup_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name in ("residual_check_interval_s", "cpuset_check_interval_s", "cpu_idle_interval_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if not re.match(r"^[A-Za-z0-9_.-]+\.sock$", self.socket_name):
            raise ValueError(f"socket_name must be a plain file name ending in .sock, got {self.socket_name!r}")

    def reserved_list(self) -> CPUSet | None:
        return CPUSet.parse(self.reserved_cpu_list) if self.reserved_cpu_list else None


def reclaim_min_for(cfg: CPUConfig, online: int) -> int:
    """The reclaim pool's minimum on a machine with ``online`` CPUs.

    Upstream's 4 is sized for big nodes; on a small box (2 CPUs, a VM) it cannot
    apply, and the embedded defaults must fit whatever machine they start on. So
    "auto" takes 4 or the CPUs the reserve leaves, whichever is fewer; a number
    the operator wrote is kept as written (the start-up check names it when it
    cannot apply).
    """
    if cfg.reclaim_min_cpus != "auto":
        return cfg.reclaim_min_cpus
    reserved = len(cfg.reserved_list() or ()) if cfg.reserved_cpu_list else cfg.reserved_cpus
    return max(0, min(RECLAIM_MIN_AUTO_CAP, online - reserved))


#: ``config[CPU_SECTION]``, the [cpu] section
CPU_SECTION: SectionKey[CPUConfig] = SectionKey("cpu", CPUConfig)
