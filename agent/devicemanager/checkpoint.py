"""The device manager's durable state: a snapshot (the checkpoint file) plus
its journal ``<checkpoint>.wal`` (``agent.journal``).

Snapshot format (JSON, one object)::

    {"Version": 2,
     "Checksum": "sha256:<hex of the canonical JSON of Data>",
     "Data": {
       "PodDeviceEntries": [{"PodUID", "PodNamespace", "PodName", "ContainerName",
                             "ContainerType", "ResourceName",
                             "DeviceIDs": {"<numa id or -1>": ["id", ...]},
                             "AllocResp": "<base64 ContainerAllocateResponse>"}],
       "RegisteredDevices": {"<resource>": ["healthy id", ...]},
       "Devices": {"<resource>": [["id", "Healthy|Unhealthy", [numa ids]], ...]},
       "Endpoints": [{"Resource", "Socket", "State", "StopTime"}],
       "Deleted": ["<resource>", ...],
       "JournalSeq": <last journal record the snapshot holds>}}

Version 1 (no ``JournalSeq``) is still read, as a snapshot holding no record.
What is state: the allocations, the resources known (so a restart waits for
their plugins) and the deleted ones. Device health and NUMA placement are not
state (the plugins tell them again on re-registration): ``Devices`` and
``Endpoints`` are what the host last knew when the snapshot was written, for
``hwagent resources``; their changes write a snapshot in the background and
never delay a call.

Journal records (canonical JSON, one per change)::

    {"Op": "Allocate", "Entries": [<PodDeviceEntries entry>...]}   one container's allocation
    {"Op": "Release", "PodUID": uid}                                 every allocation of a pod
    {"Op": "Register", "Resource": r, "Socket": s}                   a resource known from now on
    {"Op": "Delete", "Resource": r}                                  deleted after its grace period

Meaning is checked on load, snapshot and every record: no device held by two
containers unless the init-container reuse rule allows it (init containers of
one pod, and at most one other container of that same pod), known container
types, no empty names, no entry twice. A violation is corruption like a bad
checksum.

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
import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agent.devicemanager.metrics import CHECKPOINT_ERRORS
from agent.contracts.devices import (
    CONTAINER_TYPES,
    HEALTHY,
    NO_TOPOLOGY,
    UNHEALTHY,
    Allocation,
    CheckpointData,
    Device,
    EndpointRecord,
)
from agent.devicemanager.pod_devices import InconsistentAllocations, PodDevices
from agent.eventlog import get_logger
from agent.journal import Journal, StateCorrupt
from agent.sharedvalues import text
from agent.statefile import canonical_str, sha256_checksum, sha256_of

log = get_logger("hwagent.devicemanager")

FORMAT_VERSION = 2
#: versions this hwagent reads (1: before the journal)
READS = (1, 2)


class CheckpointCorrupt(StateCorrupt):
    """The checkpoint cannot be trusted (syntax, shape, version or checksum)."""


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


def encode(cp: CheckpointData, seq: int = 0) -> bytes:
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
        "JournalSeq": seq,
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
        if len(set(ids)) != len(ids):
            raise CheckpointCorrupt(f"DeviceIDs of NUMA {key} lists a device twice")
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
        # what every allocation repeats is held once, and a pod's uid and name are the
        # same objects as in the CPU entries and the pod records (agent.sharedvalues)
        pod_uid=text(_req(e, "PodUID", str)),
        pod_namespace=text(_req(e, "PodNamespace", str)),
        pod_name=text(_req(e, "PodName", str)),
        container_name=text(_req(e, "ContainerName", str)),
        container_type=text(ctype),
        resource=text(_req(e, "ResourceName", str)),
        devices=tuple((d, tuple(sorted(n))) for d, n in sorted(nodes_of.items())),
        response=resp,
    )


_WRITTEN_LAYOUT = re.compile(rb'\A\{"Version":(\d+),"Checksum":"(sha256:[0-9a-f]{64})","Data":')


def _verified_data(raw: bytes) -> dict:
    """Data, once its checksum holds. Fast path for files laid out as encode()
    writes them: hash the Data bytes as they are, parse once. Anything else
    (re-indented by hand, keys reordered) is parsed and re-canonicalised."""
    head = _WRITTEN_LAYOUT.match(raw)
    if head and raw.endswith(b"}\n") and int(head.group(1)) in READS:
        body = raw[head.end():-2]
        expected = head.group(2).decode()
        if sha256_of(body) == expected:
            try:
                data = json.loads(body)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
                raise CheckpointCorrupt(f"not JSON: {e}") from None
            if isinstance(data, dict):
                return data
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CheckpointCorrupt(f"not JSON: {e}") from None
    version = _req(doc, "Version", int)
    if version not in READS:
        raise CheckpointCorrupt(f"format version {version} (this hwagent reads {', '.join(map(str, READS))})")
    data = _req(doc, "Data", dict)
    expected = _req(doc, "Checksum", str)
    actual = sha256_checksum(data)
    if actual != expected:
        raise CheckpointCorrupt(f"checksum mismatch (file {expected}, content {actual})")
    return data


def decode_with_seq(raw: bytes) -> tuple[CheckpointData, int]:
    cp, seq, _ = _decode_validated(raw)
    return cp, seq


def _decode_validated(raw: bytes) -> tuple[CheckpointData, int, PodDevices]:
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
        seq = data.get("JournalSeq", 0)
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise CheckpointCorrupt(f"JournalSeq {seq!r} is not a sequence number")
    except (TypeError, ValueError) as e:
        if isinstance(e, CheckpointCorrupt):
            raise
        raise CheckpointCorrupt(f"bad shape: {e}") from None
    cp = CheckpointData(allocations, registered, devices, endpoints, deleted)
    state = PodDevices()
    _add_checked(state, cp.allocations)  # validates the allocations' meaning
    for name in (*cp.registered, *cp.deleted):
        if not isinstance(name, str) or not name:
            raise CheckpointCorrupt(f"bad resource name {name!r}")
    return cp, seq, state


def decode(raw: bytes) -> CheckpointData:
    return decode_with_seq(raw)[0]


def _add_checked(table: PodDevices, allocs: Iterable[Allocation]) -> None:
    """Allocations read back into ``table``; a breach of its rules is corruption like a bad checksum."""
    try:
        table.add_checked(allocs)
    except InconsistentAllocations as e:
        raise CheckpointCorrupt(str(e)) from None


@dataclass
class Recovering:
    """Replay state of the device host (mutable: records are applied in place)."""

    devs: PodDevices = field(default_factory=PodDevices)
    registered: dict[str, tuple[str, ...]] = field(default_factory=dict)
    devices: dict[str, tuple[Device, ...]] = field(default_factory=dict)
    endpoints: dict[str, EndpointRecord] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, cp: CheckpointData, devs: PodDevices | None = None) -> Recovering:
        """``devs``: the allocations of ``cp`` already validated into a table."""
        r = cls(registered=dict(cp.registered), devices=dict(cp.devices),
                endpoints={e.resource: e for e in cp.endpoints}, deleted=set(cp.deleted))
        if devs is not None:
            r.devs = devs
        else:
            _add_checked(r.devs, cp.allocations)
        return r

    def data(self) -> CheckpointData:
        return CheckpointData(
            allocations=tuple(self.devs), registered=dict(self.registered),
            devices=dict(self.devices), endpoints=tuple(self.endpoints.values()), deleted=tuple(sorted(self.deleted)),
        )


def record_allocate(allocs: Iterable[Allocation]) -> bytes:
    return ('{"Entries":[' + ",".join(_entry_json(a) for a in allocs) + '],"Op":"Allocate"}').encode()


def record_release(pod_uid: str) -> bytes:
    return canonical_str({"Op": "Release", "PodUID": pod_uid}).encode()


def record_register(resource: str, socket: str) -> bytes:
    return canonical_str({"Op": "Register", "Resource": resource, "Socket": socket}).encode()


def record_delete(resource: str) -> bytes:
    return canonical_str({"Op": "Delete", "Resource": resource}).encode()


def apply_record(r: Recovering, payload: bytes) -> Recovering:
    try:
        d = json.loads(payload)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CheckpointCorrupt("record is not JSON") from None
    op = _req(d, "Op", str)
    if op == "Allocate":
        try:
            allocs = [_decode_entry(e) for e in _req(d, "Entries", list)]
        except (TypeError, ValueError) as e:
            if isinstance(e, CheckpointCorrupt):
                raise
            raise CheckpointCorrupt(f"bad entry: {e}") from None
        _add_checked(r.devs, allocs)
    elif op == "Release":
        r.devs.remove_pod(_req(d, "PodUID", str))
    elif op == "Register":
        name, sock = _req(d, "Resource", str), _req(d, "Socket", str)
        if not name:
            raise CheckpointCorrupt("Register of an empty resource name")
        r.registered.setdefault(name, ())
        r.deleted.discard(name)
        r.endpoints[name] = EndpointRecord(name, sock, "stopped")
    elif op == "Delete":
        name = _req(d, "Resource", str)
        r.registered.pop(name, None)
        r.devices.pop(name, None)
        r.endpoints.pop(name, None)
        r.deleted.add(name)
    else:
        raise CheckpointCorrupt(f"unknown record op {op!r}")
    return r


class DeviceCodec:
    """``agent.journal.JournalCodec`` of the device host's state."""

    def empty(self) -> Recovering:
        return Recovering()

    def decode_snapshot(self, raw: bytes) -> tuple[Recovering, int]:
        cp, seq, devs = _decode_validated(raw)
        return Recovering.of(cp, devs), seq

    def encode_snapshot(self, state: CheckpointData, seq: int) -> bytes:
        return encode(state, seq)

    def apply(self, state: Recovering, payload: bytes) -> Recovering:
        return apply_record(state, payload)


def open_journal(path: Path) -> Journal:
    return Journal(path, DeviceCodec(), logger=log)


def load(path: Path, read_only: bool = False) -> CheckpointData | None:
    """Snapshot + journal; None when there is none or the snapshot was corrupt
    (then it is set aside, with its journal, and counted). A torn or corrupt
    journal tail is kept aside and counted too (unless ``read_only``)."""
    journal = open_journal(path)
    try:
        if not path.exists() and not journal.wal.exists() and not journal.old.exists():
            if not read_only:
                journal.recover()
            return None
        rec = journal.recover(accept_loss=True, read_only=read_only)
    except OSError as e:
        CHECKPOINT_ERRORS.labels(kind="read").inc()
        log.error("checkpoint read failed", path=path, error=e)
        return None
    finally:
        journal.close_sync()
    if rec.problems:
        CHECKPOINT_ERRORS.labels(kind="corrupt").inc()
    if rec.snapshot_discarded:
        log.error(
            "checkpoint corrupt", path=path, moved_to=rec.kept_aside[0] if rec.kept_aside else None,
            reason=rec.problems[0], action="start_empty",
        )
        return None
    return rec.state.data()
