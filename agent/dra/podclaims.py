"""Standalone mode: the claims a pod references, allocated and prepared for it.

Admission reserves a pod's claims before the pod is admitted: a claim not yet
allocated is allocated here (``allocator``, devices local to the NUMA nodes
its containers were aligned to first) and its ``status.allocation`` written
into its file; the pod is added to ``status.reservedFor``; then the claim is
prepared through the same ``DraDriver`` the kubelet side uses (CDI spec), and
the CDI device ids go into the containers' grants, where the runtime resolves
them like a device plugin's CDI names. A claim already allocated (shared by
another pod, or allocated by hand) keeps its allocation. Any failure undoes
what this call did, so a refused pod changes no file and prepares nothing.

When the pod ends, admission releases it: the pod leaves ``reservedFor``, and
a claim no pod reserves any more is unprepared and deallocated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent.contracts.dra import ClaimRef, PreparedDevice
from agent.contracts.hints import TopologyHint
from agent.dra.allocator import allocate, claim_hints
from agent.dra.catalog import DeviceKey
from agent.dra.claims import AllocatedDevice, ClaimError, ResourceClaim
from agent.dra.driver import DraDriver, NodeDevices
from agent.dra.files import ClaimFiles, DraFiles
from agent.eventlog import get_logger

__all__ = ["PodClaimService"]

log = get_logger("hwagent.dra")


def _held(files: DraFiles, driver: str, extra: Mapping[DeviceKey, str]) -> dict[DeviceKey, str]:
    """Every device an allocated claim file names (or the driver has prepared) -> the claim's UID."""
    out = dict(extra)
    for c in files.claims.values():
        for r in c.allocation or ():
            if r.driver == driver:
                out[(r.driver, r.pool, r.device)] = c.uid
    return out


class PodClaimService:
    """``PodClaims`` over the ``<root>/dra`` files and a ``DraDriver``."""

    def __init__(self, driver: DraDriver, files: ClaimFiles, node: Callable[[], NodeDevices], *,
                 offers: bool = True) -> None:
        """``offers``: whether any rule offers devices through DRA (else ``device_nodes`` reads nothing)."""
        self.driver = driver
        self.driver_name = driver.driver
        self.files = files
        self._node = node
        self._offers = offers
        self._lock = asyncio.Lock()

    def pod_claims(self, pod_uid: str) -> Mapping[str, tuple[ClaimRef, tuple[PreparedDevice, ...]]]:
        """A view (ps, describe, every pod-resources List): the driver's prepared claims in memory,
        and the claim files (who reserves what) read again only when one changed."""
        try:
            files = self.files.current()
        except (ClaimError, OSError):
            return {}
        prepared = self.driver.prepared()
        out: dict[str, tuple[ClaimRef, tuple[PreparedDevice, ...]]] = {}
        for c in files.claims.values():
            if any(uid == pod_uid for _, uid in c.reserved_for):
                ref, devs = prepared.get(c.uid, (ClaimRef(c.namespace, c.name, c.uid), ()))
                out[c.name] = (ref, devs)
        return out

    def device_nodes(self) -> tuple[str, ...]:
        """The nodes of every device offered through DRA (the node's reading, at most a second old)."""
        return self._node().nodes if self._offers else ()

    def device_numa(self, device: str) -> tuple[int, ...]:
        """From the node's devices (read again at most once a second by the component), so that
        ``ps``, ``describe`` and the admission answer show the node the allocator aligned on."""
        try:
            devices = self._node().devices
        except OSError:
            return ()
        for d in devices:
            if d.name == device:
                return () if d.numa_node is None else (d.numa_node,)
        return ()

    def hints(self, namespace: str, claims: Sequence[str], numa_nodes: Sequence[int]) -> list[TopologyHint] | None:
        """Read now (files and devices), on the admission's loop: the files are small and local.
        Unreadable files or unknown claims give no preference; reserve then says what is wrong."""
        try:
            files = self.files.load()
            todo = [c for n in claims if (c := files.claims.get((namespace, n))) is not None and c.allocation is None]
            if not todo:
                return None
            node = self._node()
            found = claim_hints(todo, files.classes, node.devices,
                                _held(files, self.driver.driver, self.driver.holder()), numa_nodes)
        except (ClaimError, OSError):
            return None
        return None if found is None else [TopologyHint(m, p) for m, p in found]

    async def reserve(self, pod_uid: str, pod_name: str, namespace: str, claims: Mapping[str, str],
                      numa: Mapping[str, frozenset[int] | None]) -> Mapping[str, tuple[PreparedDevice, ...]]:
        if not claims:
            return {}
        async with self._lock:
            return await self._reserve(pod_uid, pod_name, namespace, claims, numa)

    async def _reserve(self, pod_uid: str, pod_name: str, namespace: str, claims: Mapping[str, str],
                       numa: Mapping[str, frozenset[int] | None]) -> Mapping[str, tuple[PreparedDevice, ...]]:
        files = await asyncio.to_thread(self.files.load)
        node = await asyncio.to_thread(self._node)
        held = _held(files, self.driver.driver, self.driver.holder())
        plan: list[tuple[str, ResourceClaim, tuple[AllocatedDevice, ...], bool]] = []
        for pod_claim, claim_name in claims.items():
            claim = files.claims.get((namespace, claim_name))
            if claim is None:
                raise ClaimError(f"pod claim {pod_claim}: no ResourceClaim {namespace}/{claim_name} in {self.files.dir}")
            if claim.allocation is not None:
                plan.append((pod_claim, claim, claim.allocation, False))
                continue
            results = allocate(claim, files.classes, node.devices, held, numa.get(pod_claim))
            held.update({(r.driver, r.pool, r.device): claim.uid for r in results})
            plan.append((pod_claim, claim, results, True))
        done: list[tuple[ResourceClaim, tuple[AllocatedDevice, ...], bool]] = []
        prepared: list[ClaimRef] = []
        answer: dict[str, tuple[PreparedDevice, ...]] = {}
        try:
            for pod_claim, claim, results, new in plan:
                reserved = tuple(r for r in claim.reserved_for if r[1] != pod_uid) + ((pod_name, pod_uid),)
                await asyncio.to_thread(self.files.write_allocation, files, claim, results, reserved)
                done.append((claim, results, new))
                ref = ClaimRef(claim.namespace, claim.name, claim.uid)
                was_prepared = claim.uid in self.driver.prepared()
                outcome = (await self.driver.prepare([ref]))[claim.uid]
                if outcome.error:
                    raise ClaimError(outcome.error)
                if not was_prepared:
                    prepared.append(ref)
                answer[pod_claim] = outcome.devices
        except BaseException:
            await self.driver.unprepare(prepared)
            for claim, results, new in done:
                await asyncio.to_thread(self.files.write_allocation, files, claim,
                                        None if new else results, claim.reserved_for)
            raise
        log.info("dra claims reserved", pod=f"{namespace}/{pod_name}", uid=pod_uid,
                 claims=",".join(f"{k}={v}" for k, v in claims.items()))
        return answer

    async def release(self, pod_uid: str) -> None:
        async with self._lock:
            files = await asyncio.to_thread(self.files.load)
            for claim in files.claims.values():
                if not any(uid == pod_uid for _, uid in claim.reserved_for):
                    continue
                rest = tuple(r for r in claim.reserved_for if r[1] != pod_uid)
                if rest:
                    await asyncio.to_thread(self.files.write_allocation, files, claim, claim.allocation, rest)
                    continue
                errors = await self.driver.unprepare([ClaimRef(claim.namespace, claim.name, claim.uid)])
                if errors.get(claim.uid):
                    log.error("dra unprepare failed", claim=f"{claim.namespace}/{claim.name}",
                              error=errors[claim.uid])
                    continue
                await asyncio.to_thread(self.files.write_allocation, files, claim, None, ())
                log.info("dra claim released", claim=f"{claim.namespace}/{claim.name}", pod_uid=pod_uid)

    def describe(self) -> dict[str, Any]:
        return {"prepared": len(self.driver.prepared())}
