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

from agent.cgroups.fs import CgroupFS, CgroupVanished
from agent.eventlog import get_logger

__all__ = ["PERIOD_US", "pod_cgroups", "plan_quotas", "Suppressor"]

log = get_logger("hwagent.advisor")

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


class Suppressor:
    """Writes planned quotas, remembering each cgroup's value before its first write."""

    def __init__(self, fs: CgroupFS, originals: Mapping[str, tuple[int | None, int]] | None = None) -> None:
        self.fs = fs
        #: pod cgroup -> (quota µs or None: unlimited, period µs) before the advisor wrote it
        self.originals: dict[str, tuple[int | None, int]] = {k: (v[0], int(v[1])) for k, v in (originals or {}).items()}
        self.applied: dict[str, int | None] = {}

    def apply(self, plan: Mapping[str, int | None]) -> list[str]:
        """Make ``plan`` true; cgroups it no longer names get their original back. The
        cgroups written. Runs in a worker thread (file I/O); touches only this object."""
        written: list[str] = []
        for rel in sorted(set(self.originals) - set(plan)):
            self._restore(rel, written)
        for rel, quota in sorted(plan.items()):
            try:
                if quota is None:
                    if rel in self.originals:
                        self._restore(rel, written)
                    continue
                if rel not in self.originals:
                    self.originals[rel] = self.fs.read_cpu_quota(rel)
                own, own_period = self.originals[rel]
                # never looser than the pod's own limit (scaled to this period)
                want = quota if own is None else min(quota, own * PERIOD_US // max(1, own_period))
                if self.fs.write_cpu_quota(rel, max(MIN_QUOTA_US, want), PERIOD_US):
                    written.append(rel)
                self.applied[rel] = want
            except CgroupVanished:
                self.originals.pop(rel, None)
                self.applied.pop(rel, None)
            except OSError as e:
                log.warning("cpu quota write failed", path=rel, error=e.strerror)
        return written

    def _restore(self, rel: str, written: list[str]) -> None:
        own, period = self.originals.pop(rel, (None, PERIOD_US))
        self.applied.pop(rel, None)
        try:
            if self.fs.write_cpu_quota(rel, own, period):
                written.append(rel)
        except CgroupVanished:
            pass
        except OSError as e:
            log.warning("cpu quota restore failed", path=rel, error=e.strerror)

    def release(self) -> list[str]:
        """Every cgroup back to its own quota (the advisor stops: nobody would lift it)."""
        return self.apply({})
