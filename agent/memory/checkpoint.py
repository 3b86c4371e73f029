"""The memory manager's durable state: ``<root>/memory/memory_manager_state.json``
(the snapshot) plus its journal (``agent.journal``, the CPU policy's machinery:
group commit, torn tails kept aside, ``JournalCorrupt`` unless the loss is accepted).

Snapshot: ``{"version":1, "policy":"static", "journal_seq":N, "data":{"assignments":
[<assignment>...]}, "checksum":"sha256:<hex>"}``, checksum over the canonical JSON
of version, policy, journal_seq and data (as the CPU checkpoint). One record per
change: ``{"put": [<assignment>...]}`` or ``{"drop_pods": [uid...]}``.

Only the assignments are stored; the per-node usage is derived from them against
the machine read at start, so a machine that changed while hwagent was down
(memory removed, pages freed) is reconciled (``StaticPolicy.restore``), never a
refusal to start.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.contracts.memory import MemoryBlock
from agent.eventlog import get_logger
from agent.journal import Journal, JournalCorrupt, Recovered, StateCorrupt
from agent.memory.policy import Assignment
from agent.statefile import canonical_str, sha256_checksum

__all__ = ["FILE_NAME", "CheckpointError", "MemoryCodec", "MemoryStore", "Saved",
           "assignment_json", "assignment_from_json", "encode", "encode_put", "encode_drop"]

FILE_NAME = "memory_manager_state.json"
VERSION = 1
POLICY = "static"
COMPACT_BYTES = 4 << 20
log = get_logger("hwagent.memory")


class CheckpointError(Exception):
    """The state file exists but cannot be trusted (and the loss was not accepted)."""


@dataclass
class Saved:
    """Assignments by (pod, container), in the order they were made."""

    assignments: dict[tuple[str, str], Assignment] = field(default_factory=dict)


def assignment_json(a: Assignment) -> dict[str, Any]:
    return {
        "pod": a.pod_uid, "container": a.container, "namespace": a.pod_namespace, "name": a.pod_name,
        "affinity": sorted(a.affinity), "spread": a.spread,
        "blocks": [{"resource": b.resource, "size": b.size, "nodes": list(b.numa_nodes),
                    "per_node": [list(p) for p in b.per_node]} for b in a.blocks],
    }


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{what} is not a non-negative integer: {v!r}")
    return v


def assignment_from_json(d: Any) -> Assignment:
    if not isinstance(d, dict):
        raise ValueError("assignment is not an object")
    blocks = []
    for b in d["blocks"]:
        per_node = tuple((_int(n, "node"), _int(s, "size")) for n, s in b["per_node"])
        size = _int(b["size"], "size")
        if sum(s for _, s in per_node) != size:
            raise ValueError(f"block {b['resource']} of {d['pod']}/{d['container']}: per-node split does not add up")
        blocks.append(MemoryBlock(str(b["resource"]), size, tuple(_int(n, "node") for n in b["nodes"]), per_node))
    return Assignment(str(d["pod"]), str(d["container"]), tuple(blocks),
                      frozenset(_int(n, "node") for n in d["affinity"]), bool(d["spread"]),
                      str(d.get("namespace", "")), str(d.get("name", "")))


def _data(assignments: dict[tuple[str, str], Assignment]) -> dict[str, Any]:
    return {"assignments": [assignment_json(a) for a in assignments.values()]}


def _checksum(data: Any, seq: int) -> str:
    return sha256_checksum({"version": VERSION, "policy": POLICY, "journal_seq": seq, "data": data},
                           ensure_ascii=True)


def encode(assignments: dict[tuple[str, str], Assignment], seq: int) -> bytes:
    data = _data(assignments)
    doc = {"version": VERSION, "policy": POLICY, "journal_seq": seq, "data": data, "checksum": _checksum(data, seq)}
    return (canonical_str(doc, ensure_ascii=True) + "\n").encode()


def encode_put(items: list[Assignment]) -> bytes:
    return canonical_str({"put": [assignment_json(a) for a in items]}, ensure_ascii=True).encode()


def encode_drop(uids: list[str]) -> bytes:
    return canonical_str({"drop_pods": sorted(uids)}, ensure_ascii=True).encode()


class MemoryCodec:
    """``agent.journal.JournalCodec`` of the assignments."""

    def empty(self) -> Saved:
        return Saved()

    def decode_snapshot(self, raw: bytes) -> tuple[Saved, int]:
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise StateCorrupt(f"not valid JSON ({type(e).__name__}: {e})") from None
        if not isinstance(doc, dict) or doc.get("version") != VERSION or doc.get("policy") != POLICY:
            raise StateCorrupt(f"not a version {VERSION} {POLICY} memory manager state")
        seq = doc.get("journal_seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise StateCorrupt(f"journal_seq {seq!r} is not a sequence number")
        if doc.get("checksum") != _checksum(doc.get("data"), seq):
            raise StateCorrupt("checksum mismatch, the file is corrupted")
        saved = Saved()
        try:
            for d in doc["data"]["assignments"]:
                a = assignment_from_json(d)
                saved.assignments[(a.pod_uid, a.container)] = a
        except (KeyError, TypeError, ValueError) as e:
            raise StateCorrupt(f"assignments do not parse ({type(e).__name__}: {e})") from None
        return saved, seq

    def encode_snapshot(self, state: dict[tuple[str, str], Assignment], seq: int) -> bytes:
        return encode(state, seq)

    def apply(self, state: Saved, payload: bytes) -> Saved:
        try:
            rec = json.loads(payload)
            if "put" in rec:
                items = [assignment_from_json(d) for d in rec["put"]]
                for a in items:
                    state.assignments[(a.pod_uid, a.container)] = a
            elif "drop_pods" in rec:
                uids = set(rec["drop_pods"])
                for key in [k for k in state.assignments if k[0] in uids]:
                    del state.assignments[key]
            else:
                raise ValueError("record is neither put nor drop_pods")
        except (KeyError, TypeError, ValueError) as e:
            raise StateCorrupt(f"journal record does not parse ({type(e).__name__}: {e})") from None
        return state


class MemoryStore:
    """The assignments' snapshot + journal under ``directory``."""

    def __init__(self, directory: str | os.PathLike[str], compact_bytes: int = COMPACT_BYTES) -> None:
        self.dir = Path(directory)
        self.path = self.dir / FILE_NAME
        self.journal: Journal[Any] = Journal(self.path, MemoryCodec(), compact_bytes=compact_bytes, logger=log)
        self.last_recovery: Recovered[Any] | None = None

    def load(self, accept_loss: bool = False, read_only: bool = False) -> list[Assignment]:
        """The saved assignments in order (empty when there are none or they were given up)."""
        try:
            rec = self.journal.recover(accept_loss=accept_loss, read_only=read_only)
        except JournalCorrupt as e:
            raise CheckpointError(
                f"memory manager state {self.path} cannot be used: {e}. The memory placements it held are "
                f"unknown. Drain this node (or stop its workloads), then either delete the file or start hwagent "
                f"with [memory] accept_state_loss = true (the file is then kept as {self.path.name}.corrupt-<time> "
                f"and the manager starts empty)."
            ) from None
        self.last_recovery = rec
        if rec.problems:
            log.warning("memory state recovered", path=self.path, replayed=rec.replayed, problems=rec.problems,
                        kept_aside=[str(p) for p in rec.kept_aside])
        return list(rec.state.assignments.values())

    def save(self, assignments: dict[tuple[str, str], Assignment],
             capture: Callable[[], dict[tuple[str, str], Assignment]] | None = None) -> None:
        """A fresh snapshot and an empty journal (at start, and off the loop)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.journal.start(assignments, capture)
