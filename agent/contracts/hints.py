"""The one topology hint: a set of NUMA nodes a resource could be allocated
from, and whether it is the provider's preferred (narrowest possible) set.

The CPU policy and the device manager answer their hints in it, and the
topology manager merges them, so no hint is converted on the way (the
kubelet's ``TopologyHint``; sets of node ids instead of 64-bit masks, so that
callers never do bit arithmetic).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["TopologyHint", "format_affinity"]


@dataclass(frozen=True)
class TopologyHint:
    """``affinity`` None means "any node / no preference" (the kubelet's nil mask)."""

    affinity: frozenset[int] | None
    preferred: bool

    def __post_init__(self) -> None:
        if self.affinity is None:
            return
        if not isinstance(self.affinity, frozenset):
            if isinstance(self.affinity, (str, bytes)) or not isinstance(self.affinity, Iterable):
                raise TypeError(f"TopologyHint affinity must be a set of NUMA node ids or None, got {self.affinity!r}")
            object.__setattr__(self, "affinity", frozenset(self.affinity))
        for node in self.affinity:
            if isinstance(node, bool) or not isinstance(node, int) or node < 0:
                raise ValueError(f"TopologyHint affinity: NUMA node ids are integers >= 0, got {node!r}")

    @property
    def nodes(self) -> tuple[int, ...]:
        """The node ids in order (``()`` for any): what the wire's ``nodes`` list carries."""
        return () if self.affinity is None else tuple(sorted(self.affinity))

    def __str__(self) -> str:
        return f"{format_affinity(self.affinity)}{'' if self.preferred else ' (not preferred)'}"


def format_affinity(affinity: Iterable[int] | None) -> str:
    """``{0,1}`` the way users read NUMA sets; None is "any"."""
    if affinity is None:
        return "any"
    return "{" + ",".join(str(n) for n in sorted(affinity)) + "}"
