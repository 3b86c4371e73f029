"""The pressure engine's values that cross components: a container as eviction
sees it (its pod, QoS, CPUs and cgroup), which kubelet mode's pod directory
builds and the pressure engine and status read.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.cpuset import CPUSet

__all__ = ["Container", "normalize_qos"]


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
