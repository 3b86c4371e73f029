"""Stand-ins for the CPU policy the pressure engine reads allocations from, shared by
the eviction tests and bench/probes.py (both drive a real engine against real cgroups)."""

from __future__ import annotations

from dataclasses import dataclass

from agent.cpuset import CPUSet


@dataclass(frozen=True)
class Rec:
    """The fields of the CPU policy's allocation record the pressure engine reads."""

    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str
    qos_level: str
    cpuset: CPUSet
    cgroup_path: str | None


class FakePolicy:
    """Same surface as the CPU policy service (ctx.services["cpu_policy"])."""

    def __init__(self, recs: list[Rec]) -> None:
        self.recs = list(recs)
        self.removed: list[str] = []

    def allocations(self):
        return list(self.recs)

    def remove_pod(self, pod_uid: str) -> None:
        self.removed.append(pod_uid)
        self.recs = [r for r in self.recs if r.pod_uid != pod_uid]
