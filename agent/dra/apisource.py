"""Claims from an API server's ``resource.k8s.io/v1`` ResourceClaims, as the
driver's ``ClaimSource`` (kubelet mode with ``[dra] kubeconfig``).

The scheduler allocated the claim; the kubelet names it (namespace, name, UID)
and the driver only needs its identity and ``status.allocation.devices.results``.
So unlike the claim files, whose specs hwagent allocates itself and therefore
parses strictly, an API object is read leniently: spec fields hwagent would not
allocate by (``firstAvailable``, ``adminAccess``, tolerations, config) are the
scheduler's business and are not refused here. The UID check (a claim deleted
and re-created under the same name since the kubelet asked) is the driver's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent.contracts.dra import ClaimRef
from agent.dra.claims import API_VERSION, AllocatedDevice, ClaimError, ResourceClaim
from agent.dra.kubeapi import KubeApi, KubeError

__all__ = ["ApiClaimSource", "allocated_claim"]


def _m(v: Any, where: str) -> Mapping[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ClaimError(f"{where} must be a mapping, got {type(v).__name__}")
    return v


def _s(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise ClaimError(f"{where} must be a non-empty string")
    return v


def allocated_claim(doc: Any) -> ResourceClaim:
    """An API server's ResourceClaim -> a claim with its allocation (None when not allocated)."""
    d = _m(doc, "ResourceClaim")
    if d.get("apiVersion") not in (None, API_VERSION) or d.get("kind") not in (None, "ResourceClaim"):
        raise ClaimError(f"expected a {API_VERSION} ResourceClaim, got {d.get('apiVersion')} {d.get('kind')}")
    meta = _m(d.get("metadata"), "metadata")
    name, ns, uid = (_s(meta.get(k), f"metadata.{k}") for k in ("name", "namespace", "uid"))
    alloc = _m(_m(d.get("status"), "status").get("allocation"), "status.allocation")
    allocation = None
    if alloc:
        raw = _m(alloc.get("devices"), "status.allocation.devices").get("results") or []
        if not isinstance(raw, list):
            raise ClaimError("status.allocation.devices.results must be a list")
        allocation = tuple(
            AllocatedDevice(*(_s(_m(r, w).get(k), f"{w}.{k}") for k in ("request", "driver", "pool", "device")))
            for i, r in enumerate(raw) for w in (f"status.allocation.devices.results[{i}]",))
    return ResourceClaim(ns, name, uid, (), (), allocation, (), raw=dict(d))


class ApiClaimSource:
    """Reads each claim from the API server when the kubelet asks (no cache: the claim's
    allocation and UID are what they are now). The client is made on first use and kept;
    ``connect`` failing (a kubeconfig that does not load) fails that claim and is tried again."""

    def __init__(self, connect: Callable[[], KubeApi]) -> None:
        self._connect = connect
        self._api: KubeApi | None = None

    def claim(self, ref: ClaimRef) -> ResourceClaim:
        try:
            if self._api is None:
                self._api = self._connect()
            doc = self._api.read_claim(ref.namespace, ref.name)
        except KubeError as e:
            if e.status == 404:
                raise ClaimError(f"ResourceClaim {ref.namespace}/{ref.name} not found on the API server") from None
            raise ClaimError(str(e)) from None
        return allocated_claim(doc)
