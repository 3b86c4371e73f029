"""Dynamic Resource Allocation values that cross components: the claim the
kubelet (or standalone admission) asks to prepare, and what preparing it gave.

The DRA driver (``agent.dra``) owns prepared claims (their devices and CDI
spec files, journaled); the kubelet-side gRPC service (``DRAPlugin``), the
standalone runtime, ``ps``/``describe`` and pod-resources ask it through
``ClaimPreparer`` / ``PreparedClaims``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from agent.contracts.component import HandleKey
from agent.contracts.hints import TopologyHint

__all__ = ["ClaimRef", "PreparedDevice", "PrepareOutcome", "ClaimPreparer", "PreparedClaims", "PodClaims",
           "ClaimRefused", "DRA_POD_CLAIMS"]


@dataclass(frozen=True)
class ClaimRef:
    """A ResourceClaim, as the kubelet names it in NodePrepareResources."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class PreparedDevice:
    """One allocated device of a prepared claim (upstream ``Device``)."""

    requests: tuple[str, ...]
    pool: str
    device: str
    cdi_device_ids: tuple[str, ...]


@dataclass(frozen=True)
class PrepareOutcome:
    """A claim's answer: its devices, or ``error`` (non-empty) and no devices."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


class PreparedClaims(Protocol):
    """Read-only: what is prepared now (views)."""

    def prepared(self) -> Mapping[str, tuple[ClaimRef, tuple[PreparedDevice, ...]]]:
        """Every prepared claim, keyed by claim UID."""


class ClaimPreparer(PreparedClaims, Protocol):
    """Prepare and unprepare claims: idempotent, journaled, exclusive."""

    async def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        """Prepare each claim (keyed by UID in the answer); a repeated call returns the same devices."""

    async def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        """Unprepare each claim; the answer maps UID -> error ('' when done, also when not prepared)."""


class ClaimRefused(ValueError):
    """A claim that cannot be allocated or prepared; the message says which and why."""


class PodClaims(Protocol):
    """Standalone mode: the ResourceClaims a pod references, allocated and prepared for it
    (admission reserves them before the pod is admitted and releases them when it ends)."""

    #: the driver name in allocation results (pod-resources' ClaimResource.driver_name)
    driver_name: str

    def hints(self, namespace: str, claims: Sequence[str], numa_nodes: Sequence[int]) -> list[TopologyHint] | None:
        """The topology manager's hints for the named ResourceClaims not yet allocated: the NUMA node
        sets where they fit together on local devices (narrowest preferred); None = no preference."""

    async def reserve(self, pod_uid: str, pod_name: str, namespace: str, claims: Mapping[str, str],
                      numa: Mapping[str, frozenset[int] | None]) -> Mapping[str, tuple[PreparedDevice, ...]]:
        """Allocate (when not yet allocated) and prepare each claim (pod claim name -> ResourceClaim
        name, with the NUMA nodes its containers are aligned to); answers pod claim name -> its
        prepared devices (with their CDI ids). ``ClaimRefused`` with nothing changed when one cannot be."""

    async def release(self, pod_uid: str) -> None:
        """The pod no longer uses its claims: one no other pod reserves is unprepared and deallocated."""

    def pod_claims(self, pod_uid: str) -> Mapping[str, tuple[ClaimRef, tuple[PreparedDevice, ...]]]:
        """The claims reserved for a pod now (ResourceClaim name -> its ref and prepared devices)."""

    def device_nodes(self) -> Sequence[str]:
        """Host paths of the nodes of every device the driver offers (a claim may give any of them
        to a pod): the runtime denies each to every container that does not hold it."""

    def device_numa(self, device: str) -> tuple[int, ...]:
        """The NUMA nodes of one of the driver's devices (by its name in allocation results), as
        the views show a claim's devices; () when it has no locality or is not the driver's."""


#: agent.dra.component (standalone): published beside DRA_DRIVER
DRA_POD_CLAIMS: HandleKey[PodClaims] = HandleKey("dra_pod_claims")
