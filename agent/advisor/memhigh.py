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

from agent.advisor.ownvalue import OwnValueWriter
from agent.cgroups.detect import CgroupLayout
from agent.cgroups.fs import CgroupFS

__all__ = ["MemoryHigh", "memory_high_supported"]

def memory_high_supported(layout: CgroupLayout) -> str | None:
    """None when ``memory.high`` can be written on this host, else why not (for the log and docs)."""
    if layout.mode != "v2" and (layout.root / "memory").is_dir():
        return ("the memory controller is on cgroup v1, which has no memory.high: [advisor] memory_high "
                "is inert here (boot with systemd.unified_cgroup_hierarchy=1 for cgroup v2)")
    if layout.mode == "v1" or "memory" not in layout.v2_controllers:
        return ("the cgroup v2 hierarchy has no memory controller enabled: [advisor] memory_high is inert "
                "(enable memory in the root's cgroup.subtree_control)")
    return None


class MemoryHigh(OwnValueWriter[int | None, int]):
    """Writes planned highs (bytes), keeping each cgroup's own ``memory.high`` (None: max)."""

    knob = "memory.high"
    unset = None

    def __init__(self, fs: CgroupFS, originals: Mapping[str, int | None] | None = None) -> None:
        super().__init__(originals)
        self.fs = fs

    def _read(self, rel: str) -> int | None:
        return self.fs.read_memory_high(rel)

    def _bounded(self, want: int, own: int | None) -> int:
        return want if own is None else min(want, own)

    def _write(self, rel: str, value: int) -> bool:
        return self.fs.write_memory_high(rel, value)

    def _put_back(self, rel: str, own: int | None) -> bool:
        return self.fs.write_memory_high(rel, own)
