"""Which entry of a table keyed by cgroup path owns a cgroup: its own or its nearest
ancestor's. A runtime may put a container's threads in sub-cgroups of the one it
was given, so both the kubelet-mode container index and the pressure metrics'
per-container series look a path up this way. Pure string work: no cgroupfs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

__all__ = ["nearest_ancestor"]

V = TypeVar("V")


def nearest_ancestor(index: Mapping[str, V], path: str) -> V | None:
    """The value of ``path`` (trailing "/" ignored) or of its nearest ancestor in ``index``.

    A key that is no path (e.g. the BPF reader's "(other)" row) matches only itself."""
    p = path.rstrip("/")
    while p:
        hit = index.get(p)
        if hit is not None:
            return hit
        if "/" not in p:
            return None
        p = p.rsplit("/", 1)[0]
    return None
