"""What hint providers say and what the topology manager decides, as values.

A hint is the kubelet's ``TopologyHint``: a set of NUMA nodes a resource could be
allocated from, and whether that set is the provider's preferred (narrowest
possible) one. Sets of node ids are used instead of the kubelet's 64-bit masks so
that callers never do bit arithmetic; the merge converts them internally.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["TopologyHint", "ProviderHints", "Decision", "TopologyAffinityError", "format_affinity"]


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

    def __str__(self) -> str:
        return f"{format_affinity(self.affinity)}{'' if self.preferred else ' (not preferred)'}"


#: resource -> hints. None: no NUMA preference for it; []: no placement can satisfy it.
ProviderHints = Mapping[str, Sequence[TopologyHint] | None]


@dataclass(frozen=True)
class Decision:
    """The merged best hint and whether the policy admits it.

    ``resource`` and ``tried`` carry the same diagnosis as the reason, for callers
    that want it structured (they are what ``TopologyAffinityError`` holds).
    """

    hint: TopologyHint
    admit: bool
    #: when not admitted: names the resource(s) and the masks tried
    reason: str = ""
    #: the resource whose hints could not be aligned ("" if several or none)
    resource: str = ""
    #: the distinct non-empty merged masks the policy considered, best first
    tried: tuple[frozenset[int], ...] = ()


class TopologyAffinityError(Exception):
    """The policy refused the pod: its resources cannot be aligned as required.

    ``str(e)`` is the one-line reason.
    """

    def __init__(self, reason: str, resource: str = "", tried: tuple[frozenset[int], ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.resource = resource
        self.tried = tried

    def __str__(self) -> str:
        return self.reason

    def __reduce__(self):  # keep pickling (and copying) with all three fields
        return (type(self), (self.reason, self.resource, self.tried))


def format_affinity(affinity: Iterable[int] | None) -> str:
    """``{0,1}`` the way users read NUMA sets; None is "any"."""
    if affinity is None:
        return "any"
    return "{" + ",".join(str(n) for n in sorted(affinity)) + "}"
