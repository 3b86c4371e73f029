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

__all__ = ["ClaimRef", "PreparedDevice", "PrepareOutcome", "ClaimPreparer", "PreparedClaims"]


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
