"""The device manager's checkpoint: what survives a restart.

Format (JSON, one object)::

    {"Version": 1,
     "Checksum": "sha256:<hex of the canonical JSON of Data>",
     "Data": {
       "PodDeviceEntries": [{"PodUID", "PodNamespace", "PodName", "ContainerName",
                             "ContainerType", "ResourceName",
                             "DeviceIDs": {"<numa id or -1>": ["id", ...]},
                             "AllocResp": "<base64 ContainerAllocateResponse>"}],
       "RegisteredDevices": {"<resource>": ["healthy id", ...]},
       "Devices": {"<resource>": [["id", "Healthy|Unhealthy", [numa ids]], ...]},
       "Endpoints": [{"Resource", "Socket", "State", "StopTime"}],
       "Deleted": ["<resource>", ...]}}

How it differs from the kubelet's ``kubelet_internal_checkpoint``: the
``PodDeviceEntries``/``RegisteredDevices`` shapes and key names are the
kubelet's, but the kubelet has no ``Version`` and its ``Checksum`` is a uint64
FNV-32a over a go-spew dump of Go structs (type names included), which only Go
reproduces; ours is SHA-256 over ``json.dumps(Data, sort_keys=True,
separators=(",", ":"))``. Entries also carry the pod namespace/name and the
container type (needed for pod-resources and init-container reuse after a
restart), and ``Devices``/``Endpoints``/``Deleted`` record the full device
health and endpoint state for ``hwagent resources``. The file is hwagent's own
(another name than the kubelet's): neither reads the other's.

Writes are atomic (temp file, fsync, rename, fsync of the directory; see
``agent.statefile``). A file that fails to parse or verify is renamed aside
(``<name>.corrupt-<UTC time>``, ``~N`` appended rather than overwrite),
logged and counted, and the caller starts empty.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent.devicemanager.metrics import CHECKPOINT_ERRORS
from agent.devicemanager.model import CONTAINER_TYPES, HEALTHY, NO_TOPOLOGY, UNHEALTHY, Allocation, Device
from agent.statefile import Coalescer, canonical_str, set_aside, sha256_checksum, sha256_of, write_atomic

log = logging.getLogger("hwagent.devicemanager")

FORMAT_VERSION = 1


class CheckpointCorrupt(ValueError):
    """The checkpoint cannot be trusted (syntax, shape, version or checksum)."""


@dataclass(frozen=True)
class EndpointRecord:
    resource: str
    socket: str
    state: str  # "connected" or "stopped"
    stop_time: float | None = None  # wall-clock seconds


@dataclass(frozen=True)
class CheckpointData:
    allocations: tuple[Allocation, ...] = ()
    registered: dict[str, tuple[str, ...]] = field(default_factory=dict)
    devices: dict[str, tuple[Device, ...]] = field(default_factory=dict)
    endpoints: tuple[EndpointRecord, ...] = ()
    deleted: tuple[str, ...] = ()


def _entry(a: Allocation) -> dict:
    return {
        "PodUID": a.pod_uid,
        "PodNamespace": a.pod_namespace,
        "PodName": a.pod_name,
        "ContainerName": a.container_name,
        "ContainerType": a.container_type,
        "ResourceName": a.resource,
        "DeviceIDs": {str(k): v for k, v in sorted(a.devices_per_numa().items())},
        "AllocResp": base64.b64encode(a.response or b"").decode("ascii"),
    }


#: canonical JSON of each committed allocation; allocations are immutable, so a
#: node with thousands of them re-encodes only what changed on every write
_ENTRY_JSON: weakref.WeakKeyDictionary[Allocation, str] = weakref.WeakKeyDictionary()


def _entry_json(a: Allocation) -> str:
    text = _ENTRY_JSON.get(a)
    if text is None:
        text = _ENTRY_JSON[a] = canonical_str(_entry(a))
    return text


def encode(cp: CheckpointData) -> bytes:
    entries = "[" + ",".join(_entry_json(a) for a in cp.allocations if a.committed) + "]"
    data = {
        "PodDeviceEntries": None,  # spliced in below, already canonical
        "RegisteredDevices": {r: sorted(ids) for r, ids in sorted(cp.registered.items())},
        "Devices": {
            r: [[d.id, HEALTHY if d.healthy else UNHEALTHY, list(d.numa)] for d in devs]
            for r, devs in sorted(cp.devices.items())
        },
        "Endpoints": [
            {"Resource": e.resource, "Socket": e.socket, "State": e.state, "StopTime": e.stop_time}
            for e in cp.endpoints
        ],
        "Deleted": sorted(cp.deleted),
    }
    body = canonical_str(data).replace('"PodDeviceEntries":null', '"PodDeviceEntries":' + entries, 1).encode()
    return b'{"Version":%d,"Checksum":"%s","Data":%s}\n' % (FORMAT_VERSION, sha256_of(body).encode(), body)


def _req(obj: dict, key: str, tp: type | tuple[type, ...]):
    if not isinstance(obj, dict) or key not in obj:
        raise CheckpointCorrupt(f"missing {key}")
    value = obj[key]
    if not isinstance(value, tp):
        raise CheckpointCorrupt(f"{key} has the wrong type ({type(value).__name__})")
    return value


def _decode_entry(e: dict) -> Allocation:
    per_numa = _req(e, "DeviceIDs", dict)
    nodes_of: dict[str, set[int]] = {}
    for key, ids in per_numa.items():
        try:
            node = int(key)
        except ValueError:
            raise CheckpointCorrupt(f"DeviceIDs key {key!r} is not a NUMA id") from None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise CheckpointCorrupt("DeviceIDs values must be lists of strings")
        for dev in ids:
            nodes = nodes_of.setdefault(dev, set())
            if node != NO_TOPOLOGY:
                nodes.add(node)
    ctype = _req(e, "ContainerType", str)
    if ctype not in CONTAINER_TYPES:
        raise CheckpointCorrupt(f"unknown ContainerType {ctype!r}")
    try:
        resp = base64.b64decode(_req(e, "AllocResp", str), validate=True)
    except binascii.Error:
        raise CheckpointCorrupt("AllocResp is not base64") from None
    return Allocation(
        pod_uid=_req(e, "PodUID", str),
        pod_namespace=_req(e, "PodNamespace", str),
        pod_name=_req(e, "PodName", str),
        container_name=_req(e, "ContainerName", str),
        container_type=ctype,
        resource=_req(e, "ResourceName", str),
        devices=tuple((d, tuple(sorted(n))) for d, n in sorted(nodes_of.items())),
        response=resp,
    )


_WRITTEN_LAYOUT = re.compile(rb'\A\{"Version":(\d+),"Checksum":"(sha256:[0-9a-f]{64})","Data":')


def _verified_data(raw: bytes) -> dict:
    """Data, once its checksum holds. Fast path for files laid out as encode()
    writes them: hash the Data bytes as they are, parse once. Anything else
    (re-indented by hand, keys reordered) is parsed and re-canonicalised."""
    head = _WRITTEN_LAYOUT.match(raw)
    if head and raw.endswith(b"}\n") and int(head.group(1)) == FORMAT_VERSION:
        body = raw[head.end():-2]
        expected = head.group(2).decode()
        if sha256_of(body) == expected:
            try:
                data = json.loads(body)
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise CheckpointCorrupt(f"not JSON: {e}") from None
            if isinstance(data, dict):
                return data
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointCorrupt(f"not JSON: {e}") from None
    version = _req(doc, "Version", int)
    if version != FORMAT_VERSION:
        raise CheckpointCorrupt(f"format version {version} (this hwagent reads {FORMAT_VERSION})")
    data = _req(doc, "Data", dict)
    expected = _req(doc, "Checksum", str)
    actual = sha256_checksum(data)
    if actual != expected:
        raise CheckpointCorrupt(f"checksum mismatch (file {expected}, content {actual})")
    return data


def decode(raw: bytes) -> CheckpointData:
    data = _verified_data(raw)
    try:
        allocations = tuple(_decode_entry(e) for e in _req(data, "PodDeviceEntries", list))
        registered = {
            r: tuple(ids) for r, ids in _req(data, "RegisteredDevices", dict).items()
        }
        devices = {
            r: tuple(Device(i, h == HEALTHY, tuple(sorted(int(n) for n in numa))) for i, h, numa in devs)
            for r, devs in _req(data, "Devices", dict).items()
        }
        endpoints = tuple(
            EndpointRecord(
                _req(e, "Resource", str), _req(e, "Socket", str), _req(e, "State", str),
                e.get("StopTime"),
            )
            for e in _req(data, "Endpoints", list)
        )
        deleted = tuple(_req(data, "Deleted", list))
    except (TypeError, ValueError) as e:
        if isinstance(e, CheckpointCorrupt):
            raise
        raise CheckpointCorrupt(f"bad shape: {e}") from None
    return CheckpointData(allocations, registered, devices, endpoints, deleted)


def load(path: Path) -> CheckpointData | None:
    """Read the checkpoint; None when absent or when it was corrupt (and set aside)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        CHECKPOINT_ERRORS.labels(kind="read").inc()
        log.error("checkpoint_read_failed path=%s error=%s", path, e)
        return None
    try:
        return decode(raw)
    except CheckpointCorrupt as e:
        aside = set_aside(path)
        CHECKPOINT_ERRORS.labels(kind="corrupt").inc()
        log.error("checkpoint_corrupt path=%s moved_to=%s reason=%s action=start_empty", path, aside, e)
        return None


class CheckpointWriter:
    """Coalesces writes: ``await flush()`` returns once a write that began after
    the call has finished. The snapshot is taken on the loop (cheap, immutable
    pieces), once per write however many flushes asked; encoding and fsync run
    in the default executor. A failed write is counted, logged and does not
    fail the flush: memory stays authoritative and the next change rewrites."""

    def __init__(self, path: Path, snapshot: Callable[[], CheckpointData]) -> None:
        self.path = path
        self.failures = 0
        self._writes = Coalescer(self._write, "checkpoint_write", snapshot=snapshot, logger=log)

    async def flush(self) -> None:
        await self._writes.flush()

    def _write(self, snap: CheckpointData) -> None:
        try:
            write_atomic(self.path, encode(snap))
        except Exception as e:  # noqa: BLE001 - a failed write is reported, memory stays authoritative
            self.failures += 1
            CHECKPOINT_ERRORS.labels(kind="write").inc()
            log.error("checkpoint_write_failed path=%s error=%s", self.path, e)
