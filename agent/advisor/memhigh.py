"""The reclaimed pods' ``memory.high``, written on their pod cgroups (cgroup v2 only).

The memory controller (agent.advisor.memcontrol) decides one high per reclaimed pod
cgroup (the parent of its containers' cgroups, as the CPU quota's suppress.py takes);
this writes them through ``agent.cgroups.fs`` (the one writer of cgroupfs). The value a
cgroup had before the advisor's first write is kept and put back when the pod is no
longer squeezed, is no longer reclaimed, or the advisor stops, so a pod's own
``memory.high`` survives; a planned high is never looser than it. A cgroup that vanished
(its pod ended) is forgotten, not an error. cgroup v1 has no ``memory.high``
(``memory.soft_limit_in_bytes`` acts only under global reclaim and throttles nothing), so
there the option is inert: ``memory_high_supported`` says why.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.cgroups.detect import CgroupLayout
from agent.cgroups.fs import CgroupFS, CgroupVanished
from agent.eventlog import get_logger

__all__ = ["MemoryHigh", "memory_high_supported"]

log = get_logger("hwagent.advisor")


def memory_high_supported(layout: CgroupLayout) -> str | None:
    """None when ``memory.high`` can be written on this host, else why not (for the log and docs)."""
    if layout.mode != "v2" and (layout.root / "memory").is_dir():
        return ("the memory controller is on cgroup v1, which has no memory.high: [advisor] memory_high "
                "is inert here (boot with systemd.unified_cgroup_hierarchy=1 for cgroup v2)")
    if layout.mode == "v1" or "memory" not in layout.v2_controllers:
        return ("the cgroup v2 hierarchy has no memory controller enabled: [advisor] memory_high is inert "
                "(enable memory in the root's cgroup.subtree_control)")
    return None


class MemoryHigh:
    """Writes planned highs, remembering each cgroup's value before its first write."""

    def __init__(self, fs: CgroupFS, originals: Mapping[str, int | None] | None = None) -> None:
        self.fs = fs
        #: pod cgroup -> memory.high (bytes, None: max) before the advisor wrote it
        self.originals: dict[str, int | None] = dict(originals or {})
        #: pod cgroup -> the high written
        self.applied: dict[str, int] = {}

    def apply(self, plan: Mapping[str, int]) -> list[str]:
        """Make ``plan`` true; cgroups it no longer names get their own value back. The cgroups
        written. Runs in a worker thread (file I/O); touches only this object."""
        written: list[str] = []
        for rel in sorted(set(self.originals) - set(plan)):
            self._restore(rel, written)
        for rel, want in sorted(plan.items()):
            try:
                if rel not in self.originals:
                    self.originals[rel] = self.fs.read_memory_high(rel)
                own = self.originals[rel]
                value = want if own is None else min(want, own)
                if self.fs.write_memory_high(rel, value):
                    written.append(rel)
                self.applied[rel] = value
            except CgroupVanished:
                self.originals.pop(rel, None)
                self.applied.pop(rel, None)
            except (OSError, ValueError) as e:
                log.warning("memory high write failed", path=rel, error=str(e))
        return written

    def _restore(self, rel: str, written: list[str]) -> None:
        own = self.originals.pop(rel, None)
        self.applied.pop(rel, None)
        try:
            if self.fs.write_memory_high(rel, own):
                written.append(rel)
        except CgroupVanished:
            pass
        except OSError as e:
            log.warning("memory high restore failed", path=rel, error=e.strerror)

    def release(self) -> list[str]:
        """Every cgroup back to its own memory.high (the advisor stops or the option is off)."""
        return self.apply({})
