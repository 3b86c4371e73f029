"""DeviceClasses and ResourceClaims as values, parsed strictly from the
upstream ``resource.k8s.io/v1`` shapes (pure: dicts in, frozen values out).

Only what hwagent acts on is modelled; a field it would have to ignore
silently (``firstAvailable``, ``adminAccess``, ``tolerations``, capacity
requests, opaque config) is refused with a message naming it, because a claim
allocated while ignoring a field the user wrote would hand out the wrong
devices. Sizes follow the API server's limits (32 requests, selectors,
constraints and results), so a file accepted here would be accepted there.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.contracts.dra import ClaimRefused

__all__ = [
    "API_VERSION",
    "ClaimError",
    "DeviceClass",
    "DeviceRequest",
    "Constraint",
    "ResourceClaim",
    "AllocatedDevice",
    "parse_device_class",
    "parse_claim",
    "allocation_status",
    "dns_label_error",
    "dns_subdomain_error",
    "MAX_ITEMS",
]

API_VERSION = "resource.k8s.io/v1"
#: the API server's limit on requests, selectors, constraints and allocation results
MAX_ITEMS = 32
#: upstream ``CELSelectorExpressionMaxLength``
MAX_CEL_LENGTH = 10 * 1024

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: claim UIDs of local files without one: stable per namespace/name
_LOCAL_UID_NS = uuid.UUID("5d0a8c3e-1f2b-4c6d-9e7a-27a5c1d0f3b4")


class ClaimError(ClaimRefused):
    """A DeviceClass or ResourceClaim that hwagent refuses; the message says what to change."""


def dns_label_error(name: str) -> str:
    """'' when ``name`` is an RFC 1123 label (pod, request and device names), else why not."""
    if not name or len(name) > 63:
        return "must be 1-63 characters"
    if not _LABEL.fullmatch(name):
        return "must be lower-case letters, digits and '-', starting and ending with a letter or digit"
    return ""


def dns_subdomain_error(name: str) -> str:
    """'' when ``name`` is an RFC 1123 subdomain (claim, class and driver names), else why not."""
    if not name or len(name) > 253:
        return "must be 1-253 characters"
    for part in name.split("."):
        if not _LABEL.fullmatch(part):
            return "must be dot-separated lower-case labels (letters, digits, '-')"
    return ""


def _map(v: Any, where: str) -> Mapping[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ClaimError(f"{where} must be a mapping, got {type(v).__name__}")
    return v


def _list(v: Any, where: str) -> Sequence[Any]:
    if v is None:
        return ()
    if not isinstance(v, list):
        raise ClaimError(f"{where} must be a list, got {type(v).__name__}")
    if len(v) > MAX_ITEMS:
        raise ClaimError(f"{where} has {len(v)} entries; at most {MAX_ITEMS} are allowed")
    return v


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise ClaimError(f"{where} must be a string, got {type(v).__name__}")
    return v


def _known(m: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(m) - known)
    if unknown:
        raise ClaimError(f"{where}: field {unknown[0]!r} is not supported by hwagent "
                         f"(supported: {', '.join(sorted(known))})")


def _name(v: Any, where: str, *, label: bool) -> str:
    s = _str(v, where)
    err = dns_label_error(s) if label else dns_subdomain_error(s)
    if err:
        raise ClaimError(f"{where} {s[:80]!r} {err}")
    return s


def _selectors(raw: Any, where: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(_list(raw, where)):
        w = f"{where}[{i}]"
        sm = _map(s, w)
        _known(sm, {"cel"}, w)
        cel = _map(sm.get("cel"), f"{w}.cel")
        _known(cel, {"expression"}, f"{w}.cel")
        expr = _str(cel.get("expression"), f"{w}.cel.expression")
        if not expr.strip():
            raise ClaimError(f"{w}.cel.expression is empty")
        if len(expr) > MAX_CEL_LENGTH:
            raise ClaimError(f"{w}.cel.expression is {len(expr)} characters; at most {MAX_CEL_LENGTH}")
        out.append(expr)
    return tuple(out)


def _metadata(doc: Mapping[str, Any], kind: str, namespaced: bool) -> tuple[str, str, str]:
    if doc.get("apiVersion") != API_VERSION:
        raise ClaimError(f"{kind}: apiVersion must be {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != kind:
        raise ClaimError(f"expected kind {kind!r}, got {doc.get('kind')!r}")
    meta = _map(doc.get("metadata"), f"{kind}.metadata")
    name = _name(meta.get("name"), f"{kind}.metadata.name", label=False)
    ns = ""
    if namespaced:
        ns = _name(meta.get("namespace", "default"), f"{kind} {name}: metadata.namespace", label=True)
    uid = meta.get("uid")
    if uid is None:
        uid = str(uuid.uuid5(_LOCAL_UID_NS, f"{ns}/{name}"))
    uid = _str(uid, f"{kind} {name}: metadata.uid")
    if not _UID.fullmatch(uid):
        raise ClaimError(f"{kind} {name}: metadata.uid {uid[:80]!r} must be 1-64 letters, digits, '.', '_' or '-'")
    return ns, name, uid


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()


def parse_device_class(doc: Any) -> DeviceClass:
    """A DeviceClass document -> its name and CEL selectors."""
    doc = _map(doc, "DeviceClass")
    _known(doc, {"apiVersion", "kind", "metadata", "spec"}, "DeviceClass")
    _, name, _ = _metadata(doc, "DeviceClass", namespaced=False)
    spec = _map(doc.get("spec"), f"DeviceClass {name}: spec")
    _known(spec, {"selectors"}, f"DeviceClass {name}: spec")
    return DeviceClass(name, _selectors(spec.get("selectors"), f"DeviceClass {name}: spec.selectors"))


@dataclass(frozen=True)
class DeviceRequest:
    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    #: "ExactCount" or "All"
    mode: str = "ExactCount"
    count: int = 1


@dataclass(frozen=True)
class Constraint:
    #: the requests it binds; () = every request of the claim
    requests: tuple[str, ...]
    #: a fully qualified attribute name ("resource.kubernetes.io/pcieRoot")
    match_attribute: str


@dataclass(frozen=True)
class AllocatedDevice:
    """One line of ``status.allocation.devices.results``."""

    request: str
    driver: str
    pool: str
    device: str


@dataclass(frozen=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[Constraint, ...] = ()
    #: the allocation written in status, or None while unallocated
    allocation: tuple[AllocatedDevice, ...] | None = None
    #: status.reservedFor: (pod name, pod uid) of the pods using it
    reserved_for: tuple[tuple[str, str], ...] = ()
    #: the document as read, written back with a new status (fields hwagent does not model kept)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _request(raw: Any, where: str) -> DeviceRequest:
    r = _map(raw, where)
    if "firstAvailable" in r:
        raise ClaimError(f"{where}: firstAvailable (prioritized alternatives) is not supported by hwagent; "
                         "write one request with 'exactly'")
    _known(r, {"name", "exactly"}, where)
    name = _name(r.get("name"), f"{where}.name", label=True)
    ex = _map(r.get("exactly"), f"{where} ({name}).exactly")
    if not ex:
        raise ClaimError(f"{where} ({name}) needs 'exactly' with a deviceClassName")
    w = f"request {name}"
    _known(ex, {"deviceClassName", "selectors", "allocationMode", "count"}, f"{w}: exactly")
    cls = _name(ex.get("deviceClassName"), f"{w}: exactly.deviceClassName", label=False)
    mode = ex.get("allocationMode", "ExactCount")
    if mode not in ("ExactCount", "All"):
        raise ClaimError(f"{w}: allocationMode must be ExactCount or All, got {mode!r}")
    count = ex.get("count", 1 if mode == "ExactCount" else None)
    if mode == "All":
        if count is not None:
            raise ClaimError(f"{w}: count must not be set with allocationMode All")
        count = 0
    elif not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_ITEMS:
        raise ClaimError(f"{w}: count must be an integer from 1 to {MAX_ITEMS}, got {count!r}")
    return DeviceRequest(name, cls, _selectors(ex.get("selectors"), f"{w}: exactly.selectors"), mode, count)


def _constraint(raw: Any, where: str, names: set[str]) -> Constraint:
    c = _map(raw, where)
    _known(c, {"requests", "matchAttribute"}, where)
    reqs = tuple(_str(x, f"{where}.requests") for x in _list(c.get("requests"), f"{where}.requests"))
    for r in reqs:
        if r not in names:
            raise ClaimError(f"{where}.requests names {r!r}, which is no request of this claim")
    attr = _str(c.get("matchAttribute"), f"{where}.matchAttribute")
    domain, sep, ident = attr.partition("/")
    if not sep or dns_subdomain_error(domain) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,63}", ident):
        raise ClaimError(f"{where}.matchAttribute {attr[:80]!r} must be a fully qualified attribute name "
                         "(domain/name, e.g. resource.kubernetes.io/pcieRoot)")
    return Constraint(reqs, attr)


def _results(raw: Any, where: str, names: set[str]) -> tuple[AllocatedDevice, ...]:
    out = []
    for i, x in enumerate(_list(raw, where)):
        w = f"{where}[{i}]"
        m = _map(x, w)
        _known(m, {"request", "driver", "pool", "device"}, w)
        req = _str(m.get("request"), f"{w}.request")
        if req not in names:
            raise ClaimError(f"{w}.request {req!r} is no request of this claim")
        out.append(AllocatedDevice(req, _name(m.get("driver"), f"{w}.driver", label=False),
                                   _str(m.get("pool"), f"{w}.pool"),
                                   _name(m.get("device"), f"{w}.device", label=True)))
        if not out[-1].pool or len(out[-1].pool) > 253:
            raise ClaimError(f"{w}.pool must be 1-253 characters")
    return tuple(out)


def parse_claim(doc: Any) -> ResourceClaim:
    """A ResourceClaim document -> a claim (allocated when its status says so)."""
    doc = _map(doc, "ResourceClaim")
    _known(doc, {"apiVersion", "kind", "metadata", "spec", "status"}, "ResourceClaim")
    ns, name, uid = _metadata(doc, "ResourceClaim", namespaced=True)
    w = f"ResourceClaim {ns}/{name}"
    spec = _map(doc.get("spec"), f"{w}: spec")
    _known(spec, {"devices"}, f"{w}: spec")
    devices = _map(spec.get("devices"), f"{w}: spec.devices")
    _known(devices, {"requests", "constraints"}, f"{w}: spec.devices")
    raw_reqs = _list(devices.get("requests"), f"{w}: spec.devices.requests")
    if not raw_reqs:
        raise ClaimError(f"{w}: spec.devices.requests is empty; a claim asks for at least one device")
    reqs = tuple(_request(r, f"{w}: spec.devices.requests[{i}]") for i, r in enumerate(raw_reqs))
    names = {r.name for r in reqs}
    if len(names) != len(reqs):
        raise ClaimError(f"{w}: request names must be unique")
    cons = tuple(_constraint(c, f"{w}: spec.devices.constraints[{i}]", names)
                 for i, c in enumerate(_list(devices.get("constraints"), f"{w}: spec.devices.constraints")))
    status = _map(doc.get("status"), f"{w}: status")
    _known(status, {"allocation", "reservedFor", "devices"}, f"{w}: status")
    allocation = None
    if status.get("allocation") is not None:
        alloc = _map(status["allocation"], f"{w}: status.allocation")
        _known(alloc, {"devices", "nodeSelector", "allocationTimestamp"}, f"{w}: status.allocation")
        adev = _map(alloc.get("devices"), f"{w}: status.allocation.devices")
        _known(adev, {"results", "config"}, f"{w}: status.allocation.devices")
        allocation = _results(adev.get("results"), f"{w}: status.allocation.devices.results", names)
    reserved = []
    for i, r in enumerate(_list(status.get("reservedFor"), f"{w}: status.reservedFor")):
        rm = _map(r, f"{w}: status.reservedFor[{i}]")
        _known(rm, {"apiGroup", "resource", "name", "uid"}, f"{w}: status.reservedFor[{i}]")
        reserved.append((_str(rm.get("name"), f"{w}: status.reservedFor[{i}].name"),
                         _str(rm.get("uid"), f"{w}: status.reservedFor[{i}].uid")))
    return ResourceClaim(ns, name, uid, reqs, cons, allocation, tuple(reserved), raw=doc)


def allocation_status(claim: ResourceClaim, results: Sequence[AllocatedDevice] | None,
                      reserved_for: Sequence[tuple[str, str]] | None = None) -> dict[str, Any]:
    """The claim's document with ``status.allocation`` set to ``results`` (None: removed) and
    ``status.reservedFor`` to the pods (name, uid) given (None: as it was; empty: removed)."""
    doc = {k: v for k, v in claim.raw.items() if k != "status"}
    status = {k: v for k, v in _map(claim.raw.get("status"), "status").items() if k != "allocation"}
    if reserved_for is not None:
        status.pop("reservedFor", None)
        if reserved_for:
            status["reservedFor"] = [{"resource": "pods", "name": n, "uid": u} for n, u in reserved_for]
    if results is not None:
        status["allocation"] = {"devices": {"results": [
            {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device} for r in results]}}
    if status:
        doc["status"] = status
    return doc
