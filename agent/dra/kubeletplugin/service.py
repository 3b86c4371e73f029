"""The kubelet's ``DRAPlugin`` service (v1 and v1beta1) over the driver's ``ClaimPreparer``.

Protocol only: the claims the kubelet names are checked and turned into
``ClaimRef``s, the driver (``DRA_DRIVER``) prepares or unprepares them, and each
claim's outcome goes back under its UID — a claim the driver cannot prepare
fails alone, in its own answer, as upstream drivers do. What fails the whole
call, with a code the kubelet can act on and before the driver is asked (so
nothing changed):

- a claim without a UID, namespace or name, one over Kubernetes' length
  bounds, or one UID twice in a request: ``INVALID_ARGUMENT``;
- no driver yet (it has not started, or was withdrawn at stop): ``UNAVAILABLE``;
- the driver could not persist its journal (``OSError``): ``UNAVAILABLE``, retry.

v1 and v1beta1 have the same messages (v1's ``Device`` adds an optional
``share_id`` hwagent never sets), so one servicer class serves both, built
with the version's generated module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import grpc

from agent.api.dra.v1 import api_pb2 as v1_pb
from agent.api.dra.v1 import api_pb2_grpc as v1_grpc
from agent.api.dra.v1beta1 import api_pb2 as v1beta1_pb
from agent.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from agent.contracts.dra import ClaimPreparer, ClaimRef, PrepareOutcome
from agent.eventlog import get_logger
from agent.limits import DNS_LABEL_MAX, DNS_SUBDOMAIN_MAX, UID_MAX, shown

__all__ = ["ClaimError", "claim_refs", "prepare_response", "unprepare_response", "DRAPluginServicer",
           "add_dra_services"]

log = get_logger("hwagent.dra")

_BOUNDS = (("uid", UID_MAX), ("namespace", DNS_LABEL_MAX), ("name", DNS_SUBDOMAIN_MAX))


class ClaimError(ValueError):
    """A request that names a claim wrongly; answered INVALID_ARGUMENT, nothing done."""


def claim_refs(claims: Sequence[Any]) -> list[ClaimRef]:
    """The request's claims as values, checked (raises ClaimError on the first bad one)."""
    refs: list[ClaimRef] = []
    seen: set[str] = set()
    for i, c in enumerate(claims):
        for field, limit in _BOUNDS:
            value = getattr(c, field)
            if not value:
                raise ClaimError(f"claims[{i}].{field} is empty: every claim needs its uid, namespace and name")
            if len(value.encode("utf-8", "surrogatepass")) > limit:
                raise ClaimError(f"claims[{i}].{field} {shown(value, 32)} is longer than {limit} bytes")
        if c.uid in seen:
            raise ClaimError(f"claims[{i}]: uid {shown(c.uid)} is named twice in one request")
        seen.add(c.uid)
        refs.append(ClaimRef(namespace=c.namespace, name=c.name, uid=c.uid))
    return refs


def prepare_response(pb: ModuleType, refs: Sequence[ClaimRef], outcomes: Mapping[str, PrepareOutcome]) -> Any:
    """``NodePrepareResourcesResponse`` of version ``pb``: one entry per requested claim."""
    resp = pb.NodePrepareResourcesResponse()
    for ref in refs:
        entry = resp.claims[ref.uid]
        outcome = outcomes.get(ref.uid)
        if outcome is None:
            entry.error = "the DRA driver gave no answer for this claim (a bug in hwagent); retry"
        elif outcome.error:
            entry.error = outcome.error
        else:
            entry.devices.extend(
                pb.Device(request_names=list(d.requests), pool_name=d.pool, device_name=d.device,
                          cdi_device_ids=list(d.cdi_device_ids))
                for d in outcome.devices
            )
    return resp


def unprepare_response(pb: ModuleType, refs: Sequence[ClaimRef], errors: Mapping[str, str]) -> Any:
    resp = pb.NodeUnprepareResourcesResponse()
    for ref in refs:
        err = errors.get(ref.uid)
        resp.claims[ref.uid].error = (
            "the DRA driver gave no answer for this claim (a bug in hwagent); retry" if err is None else err)
    return resp


class DRAPluginServicer:
    """NodePrepareResources/NodeUnprepareResources of one API version, on the daemon's loop."""

    def __init__(self, pb: ModuleType, driver: Callable[[], ClaimPreparer | None]) -> None:
        self.pb = pb
        self._driver = driver
        #: calls answered, by method (status and tests)
        self.calls: dict[str, int] = {"prepare": 0, "unprepare": 0}

    async def _checked(self, request: Any, context: grpc.aio.ServicerContext) -> tuple[list[ClaimRef], ClaimPreparer]:
        try:
            refs = claim_refs(request.claims)
        except ClaimError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        driver = self._driver()
        if driver is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE,
                                "hwagent's DRA driver is not running (starting, stopping or disabled in [dra]); retry")
        return refs, driver

    async def NodePrepareResources(self, request, context):
        refs, driver = await self._checked(request, context)
        try:
            outcomes = await driver.prepare(refs) if refs else {}
        except OSError as e:
            log.error("dra prepare failed", claims=len(refs), error=e)
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"could not record the prepared claims: {e}; retry")
        self.calls["prepare"] += 1
        return prepare_response(self.pb, refs, outcomes)

    async def NodeUnprepareResources(self, request, context):
        refs, driver = await self._checked(request, context)
        try:
            errors = await driver.unprepare(refs) if refs else {}
        except OSError as e:
            log.error("dra unprepare failed", claims=len(refs), error=e)
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"could not record the unprepared claims: {e}; retry")
        self.calls["unprepare"] += 1
        return unprepare_response(self.pb, refs, errors)


def add_dra_services(server: grpc.aio.Server, driver: Callable[[], ClaimPreparer | None]
                     ) -> dict[str, DRAPluginServicer]:
    """Both DRAPlugin versions on ``server``; returns the servicers by version."""
    v1 = DRAPluginServicer(v1_pb, driver)
    v1beta1 = DRAPluginServicer(v1beta1_pb, driver)
    v1_grpc.add_DRAPluginServicer_to_server(v1, server)
    v1beta1_grpc.add_DRAPluginServicer_to_server(v1beta1, server)
    return {"v1": v1, "v1beta1": v1beta1}
