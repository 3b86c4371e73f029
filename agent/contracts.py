"""What components promise each other, as small Protocols.

Components do not reach into each other's classes; each depends on the
narrowest interface that serves it, named here, so the coupling between them is
visible in imports and checked by mypy. Handles are published and looked up
through typed keys (``ServiceKey``), in start order: a component only looks up
what a component started before it published.

The admission/runtime pair is the core of standalone mode:

    admission ──AdmittedPod──► PodRuntime.run()
        ▲                           │
        └── PodStatusSink.pod_status_changed(uid, PodStatus) ◄──┘

Admission owns the registry and every resource decision; the runtime owns
processes and their cgroups and never allocates or releases anything itself:
when a pod reaches a terminal phase it says so, and admission releases the
pod's CPUs and devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from agent.workloads.model import AdmittedPod, PodStatus

__all__ = [
    "ServiceKey",
    "ActivePods",
    "PodStatusSink",
    "WorkloadRegistry",
    "PodRuntime",
    "WORKLOADS",
    "RUNTIME",
]

T = TypeVar("T")


@dataclass(frozen=True)
class ServiceKey(Generic[T]):
    """A typed name for a handle in ``DaemonContext.services`` (like aiohttp's AppKey)."""

    name: str


@runtime_checkable
class ActivePods(Protocol):
    def active_pod_uids(self) -> frozenset[str]:
        """UIDs of pods that still exist and are not terminated."""


class PodStatusSink(Protocol):
    async def pod_status_changed(self, uid: str, status: PodStatus) -> None:
        """Record a pod's new status (persisted before returning). A terminal
        phase makes the owner release the pod's CPUs and devices."""


class WorkloadRegistry(ActivePods, PodStatusSink, Protocol):
    """What the runtime (and eviction) may ask of the admitted pods."""

    def get(self, uid: str) -> AdmittedPod | None:
        """The admitted pod with this UID, or None."""

    def admitted(self) -> Sequence[AdmittedPod]:
        """Every admitted pod whose phase is not terminal, in admission order."""

    def status(self, uid: str) -> PodStatus | None:
        """The last recorded status of a pod."""


class PodRuntime(Protocol):
    """Runs admitted pods as process trees in their own cgroups."""

    async def run(self, pod: AdmittedPod) -> None:
        """Create the pod's cgroups and start it; returns once its first
        container started or failed to (the failure is a status, not an exception)."""

    async def stop(self, uid: str, grace_s: float | None = None, reason: str = "Stopped") -> None:
        """SIGTERM, wait the grace period (the pod's own when None), kill the
        cgroup, remove it; the pod ends in a terminal phase with ``reason``."""

    async def evict(self, uid: str, message: str) -> None:
        """``stop`` with reason "Evicted" and the evidence in ``message``."""

    async def restore(self, pods: Sequence[AdmittedPod]) -> None:
        """At start: re-attach to the containers of pods that were running,
        record exits that happened while hwagent was down, re-apply drifted settings."""

    def owns_cgroup(self, rel_path: str) -> bool:
        """Whether a cgroup path (relative to a controller root) is one of the runtime's."""


#: published by the admission component (agent.workloads), looked up by the runtime and eviction
WORKLOADS: ServiceKey[WorkloadRegistry] = ServiceKey("workloads")
#: published by the runtime component (agent.runtime), looked up by admission and eviction
RUNTIME: ServiceKey[PodRuntime] = ServiceKey("runtime")
