"""Who is running: the active-pods interface shared by the device manager, the
CPU policy and eviction.

In standalone mode the workload registry (``agent.workloads``) is the source,
published as ``ACTIVE_PODS`` (``agent.contracts``); tests use ``StaticActivePods``. Consumers ask only "which pod
UIDs are active now", the one question both the kubelet device manager and
Katalyst's residual cleanup ask.
"""

from __future__ import annotations

from agent.contracts import ActivePods, Deferred

__all__ = ["ActivePods", "JoinedActivePods", "StaticActivePods"]


class JoinedActivePods:
    """One source's pods and those of the fronts beside it (the NRI front's, published later:
    a ``Deferred``, nothing until then): residual cleanup must not take the CPUs of a pod
    another front placed because the registry does not know it."""

    def __init__(self, main: ActivePods, *others: Deferred[ActivePods]) -> None:
        self.main = main
        self.others = others

    def active_pod_uids(self) -> frozenset[str]:
        uids = self.main.active_pod_uids()
        for ref in self.others:
            src = ref()
            if src is not None:
                uids = uids | src.active_pod_uids()
        return uids


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
