"""What hint providers say and what the topology manager decides, as values.

A hint is the kubelet's ``TopologyHint``: a set of NUMA nodes a resource could be
allocated from, and whether that set is the provider's preferred (narrowest
possible) one. Sets of node ids are used instead of the kubelet's 64-bit masks so
that callers never do bit arithmetic; the merge converts them internally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.contracts.hints import TopologyHint, format_affinity

__all__ = ["TopologyHint", "ProviderHints", "Decision", "TopologyAffinityError", "format_affinity"]


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
