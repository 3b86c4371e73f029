"""Suppression: the reclaimed pods' CPU quota, written on their pod cgroups.

The controller decides one quota for all reclaimed pods together (CPUs); it is split
evenly over the reclaimed pods' cgroups (the parent of each container's cgroup: the
runtime's and the kubelet's pod level, where ``cpu.idle`` already is) as a CFS quota
per 100 ms period (``cpu.cfs_quota_us`` on v1, ``cpu.max`` on v2), never under the
kernel's 1 ms. The value a cgroup had before the advisor's first write is kept and put
back when suppression ends or the advisor stops, so a pod's own CPU limit survives.
The writes go through ``agent.cgroups.fs`` (the one writer of cgroupfs).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping

from agent.advisor.ownvalue import OwnValueWriter
from agent.cgroups.fs import CgroupFS

__all__ = ["PERIOD_US", "pod_cgroups", "plan_quotas", "Suppressor"]

PERIOD_US = 100_000
MIN_QUOTA_US = 1000


def pod_cgroups(container_paths: Iterable[str]) -> list[str]:
    """The pod cgroups (parents of container cgroups), each once, sorted."""
    return sorted({posixpath.dirname(p.rstrip("/")) or "/" for p in container_paths if p})


def plan_quotas(pods: list[str], quota_cpus: float | None) -> dict[str, int | None]:
    """Per pod cgroup: its quota (µs per ``PERIOD_US``), or None (not suppressed)."""
    if quota_cpus is None or not pods:
        return dict.fromkeys(pods)
    each = max(MIN_QUOTA_US, int(quota_cpus * PERIOD_US / len(pods)))
    return dict.fromkeys(pods, each)


class Suppressor(OwnValueWriter[tuple[int | None, int], int]):
    """Writes planned quotas (µs per ``PERIOD_US``), keeping each cgroup's own quota and period."""

    knob = "cpu quota"
    unset = (None, PERIOD_US)

    def __init__(self, fs: CgroupFS, originals: Mapping[str, tuple[int | None, int]] | None = None) -> None:
        # state.json gives the pairs back as lists
        super().__init__({k: (v[0], int(v[1])) for k, v in (originals or {}).items()})
        self.fs = fs

    def _read(self, rel: str) -> tuple[int | None, int]:
        return self.fs.read_cpu_quota(rel)

    def _bounded(self, want: int, own: tuple[int | None, int]) -> int:
        quota, period = own
        # never looser than the pod's own limit (scaled to this period)
        return want if quota is None else min(want, quota * PERIOD_US // max(1, period))

    def _write(self, rel: str, value: int) -> bool:
        return self.fs.write_cpu_quota(rel, max(MIN_QUOTA_US, value), PERIOD_US)

    def _put_back(self, rel: str, own: tuple[int | None, int]) -> bool:
        return self.fs.write_cpu_quota(rel, own[0], own[1])
