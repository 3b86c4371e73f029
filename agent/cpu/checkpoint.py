"""The policy's durable state: ``<root>/cpu/cpu_plugin_state.json`` (the
snapshot) plus its journal ``cpu_plugin_state.json.wal`` (``agent.journal``).

Snapshot format (version 2): ``{"version":2, "policy":"dynamic",
"journal_seq":N, "data":{pools, pod_entries}, "checksum":"sha256:<hex>"}``
where the checksum covers the canonical JSON (sorted keys, no spaces, non-ASCII
escaped) of version, policy, journal_seq and data. Version 1 (no journal_seq,
checksum over version, policy and data) is still read, as a snapshot holding
no journal record. Upstream's checksum is an FNV-32a over a Go-specific struct
dump that Python cannot reproduce, so files are not interchangeable with
Katalyst's (docs/cpu-policy.md).

Journal record (one per committed policy change, canonical JSON)::

    {"put": [<entry>...], "drop_pods": [uid...], "pools": {name: cpuset},
     "basis": {"ramp": cpuset, "all": cpuset}}

``put`` holds the entries the call wrote, ``pools`` is present when pools
changed, ``basis`` when pools were re-sized (``Change.adjusted``): every pool
follower then holds its pool's cpuset, so the record names the rule instead of
the hundreds of followers it moved (``state.repoint_followers``). Replay
applies each record's explicit part at once and the followers' rule once at
the end (followers written explicitly after the last re-size keep their
values), so recovery costs O(records + containers).

Meaning is checked on load (``state.validate_state``): a file with a valid
checksum whose entries share dedicated CPUs, name CPUs this machine lacks, an
unknown QoS level or container type, or a negative quantity is corrupt like a
bad checksum. A corrupt snapshot stops start-up with a message saying what to
do, unless the caller accepts the loss; then the files are kept aside as
``<name>.corrupt-<UTC time>`` (never overwritten) and the policy starts empty.
A torn or corrupt journal tail is kept aside and replay stops before it (what
a crash during an append leaves: never acknowledged).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from agent.cpu.state import Change, Key, PolicyState, repoint_followers, validate_entry, validate_state
from agent.contracts.cpu import AllocationInfo, _cpuset_json
from agent.cpuset import CPUSet
from agent.eventlog import get_logger
from agent.journal import Journal, JournalCorrupt, Recovered, StateCorrupt
from agent.statefile import canonical_str, checksum_holds_as_written, sha256_checksum, sha256_of

__all__ = ["CheckpointError", "CheckpointStore", "FILE_NAME", "PolicyCodec", "VERSION", "encode_change",
           "kept_as_loaded"]

FILE_NAME = "cpu_plugin_state.json"
VERSION = 2
#: versions this hwagent reads (1: before the journal)
READS = (1, 2)
#: the journal is compacted into a new snapshot past this size
COMPACT_BYTES = 4 << 20
POLICY = "dynamic"
log = get_logger("hwagent.cpu")


class CheckpointError(Exception):
    """The checkpoint exists but cannot be trusted."""


def _checksum(version: int, policy: str, data: Any, seq: int | None = None) -> str:
    signed: dict[str, Any] = {"version": version, "policy": policy, "data": data}
    if seq is not None:
        signed["journal_seq"] = seq
    return sha256_checksum(signed, ensure_ascii=True)


_dumps = partial(canonical_str, ensure_ascii=True)


def _entry_text(state: PolicyState, uid: str, pod: dict[str, AllocationInfo], a: AllocationInfo) -> str:
    """Canonical JSON of the stored entry ``a`` as it resolves now. No text is kept
    on the entry: snapshots come once every few MB of journal, and a cached text on
    every entry cost ~2.5 KB each (25 MB at 10,000 pods, issue 24) to save ~0.02 ms
    per entry per snapshot."""
    return state.resolve(uid, pod, a).encoded(keep=False)


def _data_json(state: PolicyState) -> str:
    """Canonical JSON of ``state.to_json()``, assembled from per-entry cached
    encodings (byte-identical to ``canonical_json(state.to_json(), ensure_ascii=True)``)."""
    pods = ",".join(
        _dumps(uid) + ":{" + ",".join(_dumps(c) + ":" + _entry_text(state, uid, pod, a)
                                      for c, a in sorted(pod.items())) + "}"
        for uid, pod in sorted(state.stored.items())
    )
    pools = _dumps({k: str(v) for k, v in state.pools.items()})
    return '{"pod_entries":{' + pods + '},"pools":' + pools + "}"


def encode(state: PolicyState, seq: int = 0) -> bytes:
    data = _data_json(state)
    tail = ',"policy":' + _dumps(POLICY) + ',"version":' + str(VERSION) + "}"
    signed = '{"data":' + data + ',"journal_seq":' + str(seq) + tail
    checksum = sha256_of(signed.encode())
    doc = '{"checksum":' + _dumps(checksum) + ',"data":' + data + ',"journal_seq":' + str(seq) + tail
    return (doc + "\n").encode()


def decode_with_seq(raw: bytes, online: Collection[int] | None = None) -> tuple[PolicyState, int]:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise CheckpointError(f"not valid JSON ({type(e).__name__}: {e})") from None
    if not isinstance(doc, dict):
        raise CheckpointError("top level is not a JSON object")
    version = doc.get("version")
    if version not in READS or isinstance(version, bool):
        raise CheckpointError(f"unsupported format version {version!r} (this hwagent reads versions {READS})")
    if doc.get("policy") != POLICY:
        raise CheckpointError(f"written by policy {doc.get('policy')!r}, not {POLICY!r}")
    data: Any = doc.get("data")  # any JSON: from_json below is what checks it
    seq = doc.get("journal_seq") if version >= 2 else None
    if version >= 2 and (not isinstance(seq, int) or isinstance(seq, bool) or seq < 0):
        raise CheckpointError(f"journal_seq {seq!r} is not a sequence number")
    if not checksum_holds_as_written(raw) and doc.get("checksum") != _checksum(version, POLICY, data, seq):
        raise CheckpointError("checksum mismatch, the file is corrupted")
    try:
        st = PolicyState.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CheckpointError(f"entries do not parse ({type(e).__name__}: {e})") from None
    try:
        validate_state(st, online)
    except ValueError as e:
        raise CheckpointError(f"entries are inconsistent: {e}") from None
    return st, seq or 0


def decode(raw: bytes) -> PolicyState:
    return decode_with_seq(raw)[0]


# -- journal records ----------------------------------------------------------------

def encode_change(old: PolicyState, new: PolicyState, change: Change) -> bytes:
    """The journal record of one committed change (``old`` -> ``new``)."""
    puts: list[str] = []
    drop: list[Key] = []
    for uid, c in change.put:
        pod = new.stored.get(uid)
        a = None if pod is None else pod.get(c)
        if pod is None or a is None:
            drop.append((uid, c))
        else:
            puts.append(_entry_text(new, uid, pod, a))
    parts = ['"put":[' + ",".join(puts) + "]"]
    if drop:
        parts.append('"drop":' + _dumps([list(k) for k in drop]))
    if change.drop_pods:
        parts.append('"drop_pods":' + _dumps(list(change.drop_pods)))
    if new.pools is not old.pools and new.pools != old.pools:
        parts.append('"pools":{' + ",".join(_dumps(k) + ":" + _cpuset_json(v) for k, v in sorted(new.pools.items()))
                     + "}")
    if change.adjusted:
        basis = new.index().basis
        assert basis is not None
        parts.append('"basis":{"all":' + _cpuset_json(basis.all_cpus) + ',"ramp":' + _cpuset_json(basis.ramp) + "}")
    return ("{" + ",".join(sorted(parts)) + "}").encode()


@dataclass
class Replay:
    """Replay state: the policy state with records' explicit parts applied,
    plus the last re-size rule still to apply to followers (see module doc)."""

    state: PolicyState = field(default_factory=PolicyState)
    basis: tuple[CPUSet, CPUSet] | None = None  # (ramp, all cpus) of the last re-size
    basis_pools: dict[str, CPUSet] | None = None
    explicit: set[Key] = field(default_factory=set)

    def finish(self) -> PolicyState:
        st = self.state
        if self.basis is not None and self.basis_pools is not None:
            st = repoint_followers(st, self.basis_pools, self.basis[0], self.basis[1], self.explicit)
        return st


def _cpuset(v: Any, what: str) -> CPUSet:
    if not isinstance(v, str):
        raise StateCorrupt(f"{what} is not a cpuset string")
    try:
        return CPUSet.parse(v)
    except ValueError as e:
        raise StateCorrupt(f"{what}: {e}") from None


def apply_record(r: Replay, payload: bytes) -> Replay:
    """One record onto ``r``; everything is checked before anything changes."""
    try:
        d = json.loads(payload)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise StateCorrupt(f"record is not JSON ({type(e).__name__})") from None
    if not isinstance(d, dict) or not isinstance(d.get("put"), list):
        raise StateCorrupt("record is not an object with a put list")
    try:
        puts = [AllocationInfo.from_json(e) for e in d["put"]]
        for a in puts:
            validate_entry(a.pod_uid, a.container_name, a)
        drop = [(str(u), str(c)) for u, c in d.get("drop", [])]
        drop_pods = [str(u) for u in d.get("drop_pods", [])]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise StateCorrupt(f"record entries do not parse ({type(e).__name__}: {e})") from None
    pools = None
    if "pools" in d:
        if not isinstance(d["pools"], dict):
            raise StateCorrupt("record pools is not an object")
        pools = {str(k): _cpuset(v, f"pool {k}") for k, v in d["pools"].items()}
    basis = None
    if "basis" in d:
        b = d["basis"]
        if not isinstance(b, dict):
            raise StateCorrupt("record basis is not an object")
        basis = (_cpuset(b.get("ramp"), "basis ramp"), _cpuset(b.get("all"), "basis all"))
    st = r.state
    for uid in drop_pods:
        st = st.without_pod(uid)
    for uid, c in drop:
        st = st.without_entry(uid, c)
    for a in puts:
        st = st.with_entry(a)
    if pools is not None:
        st = st.with_pools(pools)
    if basis is not None:
        r.basis, r.basis_pools = basis, st.pools
        r.explicit = set()
    else:
        r.explicit.update((a.pod_uid, a.container_name) for a in puts)
    r.state = st
    return r


class PolicyCodec:
    """``agent.journal.JournalCodec`` of the policy state (decode gives a ``Replay``)."""

    def __init__(self, online: Collection[int] | None = None) -> None:
        self.online = online

    def empty(self) -> Replay:
        return Replay()

    def decode_snapshot(self, raw: bytes) -> tuple[Replay, int]:
        try:
            st, seq = decode_with_seq(raw, self.online)
        except CheckpointError as e:
            raise StateCorrupt(str(e)) from None
        return Replay(st), seq

    def encode_snapshot(self, state: PolicyState, seq: int) -> bytes:
        return encode(state, seq)

    def apply(self, state: Replay, payload: bytes) -> Replay:
        return apply_record(state, payload)


def kept_as_loaded(loaded: PolicyState | None, state: PolicyState) -> bool:
    """Whether ``state`` (the policy built at start) is exactly what the files hold
    (``loaded``), so records appended from now on may follow the journal as it is. The
    start only re-draws pools (``pools.init_pools``: the reserve, reclaim, pools no
    container names); the entries are the loaded ones."""
    return loaded is not None and state.stored is loaded.stored and state.pools == loaded.pools


class CheckpointStore:
    """The policy's snapshot + journal under ``directory``."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        online: Collection[int] | None = None,
        compact_bytes: int = COMPACT_BYTES,
    ) -> None:
        self.dir = Path(directory)
        self.path = self.dir / FILE_NAME
        self.codec = PolicyCodec(online)
        self.journal: Journal[Any] = Journal(self.path, self.codec, compact_bytes=compact_bytes, logger=log)
        self.last_recovery: Recovered[Any] | None = None

    def load(self, accept_loss: bool = False, read_only: bool = False) -> PolicyState | None:
        """The saved state (snapshot + journal), or None when there is none
        (or it was given up). ``read_only``: change no file (tools reading
        while the daemon runs)."""
        if not self.path.exists() and not self.journal.wal.exists() and not self.journal.old.exists():
            if not read_only:
                self.journal.recover(read_only=False)  # stale temp files of a killed first write
            return None
        try:
            rec = self.journal.recover(accept_loss=accept_loss, read_only=read_only)
        except JournalCorrupt as e:
            raise CheckpointError(
                f"cpu checkpoint {self.path} cannot be used: {e}. The cpu allocations it held are unknown. "
                f"Drain this node (or stop its workloads), then either delete the file or start hwagent with "
                f"[cpu] accept_state_loss = true (the file is then kept as {self.path.name}.corrupt-<time> "
                f"and the policy starts empty)."
            ) from None
        self.last_recovery = rec
        if rec.snapshot_discarded:
            log.warning(
                "checkpoint discarded", path=self.path, kept_as=rec.kept_aside[0] if rec.kept_aside else None,
                reason=rec.problems[0],
            )
            return None
        st = rec.state.finish()
        try:
            if rec.replayed:  # else ``st`` is the snapshot's state, which decoding validated
                validate_state(st, self.codec.online)
        except ValueError as e:  # each record valid, together not: the journal is not to be trusted
            if not accept_loss or read_only:
                raise CheckpointError(
                    f"cpu checkpoint {self.path} and its journal are inconsistent: {e}. Drain the node, then "
                    f"delete the files or start hwagent with [cpu] accept_state_loss = true.") from None
            aside = self.journal.set_aside_all()
            log.warning("checkpoint discarded", path=self.path, kept_as=aside, reason=str(e))
            return None
        if rec.problems:
            log.warning(
                "checkpoint recovered", path=self.path, replayed=rec.replayed, problems=rec.problems,
                kept_aside=[str(p) for p in rec.kept_aside],
            )
        return st

    def open(self, loaded: PolicyState | None, state: PolicyState, capture: Callable[[], PolicyState]) -> bool:
        """Start journaling from ``state``, the policy built from ``loaded`` (what ``load``
        returned). Blocking (an executor at start); once, after ``load``.

        When memory is what the files hold (``kept_as_loaded``: the common restart), the
        snapshot and journal are kept and appended to: rewriting the whole snapshot here
        cost 209 ms at 10,000 pods on the READY path (issue 24). Otherwise (no state, one
        given up, or a start that re-drew the pools) a fresh snapshot is written as before.
        True when records were replayed, so a compaction is due: the caller asks the
        journal for one later (``Journal.request_snapshot``, off the READY path), or
        replay would grow with every killed run until the journal reaches its size limit."""
        if not kept_as_loaded(loaded, state):
            self.save(state, capture)
            return False
        self.dir.mkdir(parents=True, exist_ok=True)
        self.journal.resume(capture)
        rec = self.last_recovery
        return rec is not None and rec.replayed > 0

    def save(self, state: PolicyState, capture: Callable[[], PolicyState] | None = None) -> None:
        """Write ``state`` as a fresh snapshot and open an empty journal (at
        start, and for tools that change state off the daemon's loop)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.journal.start(state, capture)
