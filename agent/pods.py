"""Who is running: the active-pods interface shared by the device manager, the
CPU policy and eviction.

In standalone mode the workload registry (``agent.workloads``) is the source,
published as ``ACTIVE_PODS`` (``agent.contracts``); tests use ``StaticActivePods``. Consumers ask only "which pod
UIDs are active now", the one question both the kubelet device manager and
Katalyst's residual cleanup ask.
"""

from __future__ import annotations

from agent.contracts import ActivePods

__all__ = ["ActivePods", "StaticActivePods"]


class StaticActivePods:
    """An ActivePods whose membership the owner sets explicitly."""

    def __init__(self, uids: set[str] | frozenset[str] = frozenset()) -> None:
        self._uids = frozenset(uids)

    def active_pod_uids(self) -> frozenset[str]:
        return self._uids

    def set(self, uids: set[str] | frozenset[str]) -> None:
        self._uids = frozenset(uids)

    def add(self, uid: str) -> None:
        self._uids = self._uids | {uid}

    def remove(self, uid: str) -> None:
        self._uids = self._uids - {uid}
