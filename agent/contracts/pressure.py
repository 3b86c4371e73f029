"""The pressure engine's values that cross components: a container as eviction
sees it (its pod, QoS, CPUs and cgroup), which kubelet mode's pod directory
builds and the pressure engine and status read; and an eviction decision, which
the pressure engine makes and the published ``Evictor`` (the runtime, or the
Katalyst eviction plugin) carries out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.cpuset import CPUSet

__all__ = ["Container", "Eviction", "normalize_qos"]


def normalize_qos(level: str) -> str:
    """'reclaimed_cores' / 'reclaimed' -> 'reclaimed' (Katalyst names and short names)."""
    lv = (level or "").lower()
    return lv[: -len("_cores")] if lv.endswith("_cores") else lv


@dataclass(frozen=True)
class Container:
    pod_uid: str
    container_name: str
    qos_level: str
    cpuset: CPUSet
    cgroup_path: str | None = None
    pod_namespace: str = ""
    pod_name: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.pod_uid, self.container_name)

    @property
    def qos(self) -> str:
        return normalize_qos(self.qos_level)


@dataclass(frozen=True)
class Eviction:
    """One decision to evict a pod: which containers, from which pool, why, and the
    evidence (run-queue delay per container) the pressure engine saw."""

    pod_uid: str
    pod_namespace: str
    pod_name: str
    containers: tuple[str, ...]
    pool: str
    reason: str  # "cpu_pressure_soft" | "cpu_pressure_hard"
    signal: str  # "runqueue_delay"
    at: float
    evidence: Mapping[str, Any] = field(default_factory=dict)
