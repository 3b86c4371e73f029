"""Where the workload registry keeps its records across restarts.

One small interface (``RegistryStore``: load, put, delete) and one
implementation, so moving to the write-ahead journal the durable-state work
adds to ``agent/statefile.py`` is a change in this module only.

``PodFileStore`` keeps one file per pod, ``<dir>/<uid>.json``: an admission
writes only its own pod (a few KiB, one fsync) instead of rewriting every
admitted pod. Each file is written atomically through ``statefile.write_atomic``
and carries a format version and a SHA-256 checksum over its canonical JSON.
A file that fails to decode or verify stops start-up with a message saying
what to do, unless the caller accepts the loss: then it is kept aside as
``<name>.corrupt-<UTC time>`` (never overwritten) and skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent.eventlog import get_logger
from agent.statefile import canonical_json, set_aside, sha256_checksum, write_atomic
from agent.workloads.codec import pod_from_json, pod_to_json, status_from_json, status_to_json
from agent.workloads.model import AdmittedPod, PodStatus

__all__ = ["PodRecord", "RegistryStateError", "RegistryStore", "PodFileStore", "VERSION"]

log = get_logger("hwagent.workloads")
VERSION = 1
SUFFIX = ".json"


@dataclass(frozen=True)
class PodRecord:
    """What the registry knows of one pod: the admission, the last status, and
    whether its CPUs and devices were handed back (after a terminal phase)."""

    pod: AdmittedPod
    status: PodStatus = PodStatus()
    released: bool = False
    #: (unix time, one line) for ``hwagent describe``; the last few only
    events: tuple[tuple[float, str], ...] = ()

    @property
    def uid(self) -> str:
        return self.pod.uid

    @property
    def key(self) -> str:
        return self.pod.spec.key


def record_to_json(r: PodRecord) -> dict[str, Any]:
    return {
        "pod": pod_to_json(r.pod),
        "status": status_to_json(r.status),
        "released": r.released,
        "events": [[t, m] for t, m in r.events],
    }


def record_from_json(d: dict[str, Any]) -> PodRecord:
    released = d["released"]
    if not isinstance(released, bool):
        raise TypeError("released must be a boolean")
    return PodRecord(
        pod=pod_from_json(d["pod"]),
        status=status_from_json(d["status"]),
        released=released,
        events=tuple((float(t), str(m)) for t, m in d["events"]),
    )


class RegistryStateError(Exception):
    """A stored record exists but cannot be trusted."""


class RegistryStore(Protocol):
    def load(self, accept_loss: bool = False) -> list[PodRecord]:
        """Every stored record, in admission order."""

    def put(self, record: PodRecord) -> None:
        """Durable when it returns (blocking: call it from an executor)."""

    def delete(self, uid: str) -> None:
        """Durable when it returns; a missing record is not an error."""


def encode(record: PodRecord) -> bytes:
    body = record_to_json(record)
    doc = {"version": VERSION, "record": body, "checksum": sha256_checksum({"version": VERSION, "record": body})}
    return canonical_json(doc) + b"\n"


def decode(raw: bytes) -> PodRecord:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise RegistryStateError(f"not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise RegistryStateError("top level is not a JSON object")
    if doc.get("version") != VERSION:
        raise RegistryStateError(f"unsupported format version {doc.get('version')!r} (this hwagent reads {VERSION})")
    body = doc.get("record")
    if doc.get("checksum") != sha256_checksum({"version": VERSION, "record": body}):
        raise RegistryStateError("checksum mismatch, the file is corrupted")
    try:
        return record_from_json(body)  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise RegistryStateError(f"record does not parse ({type(e).__name__}: {e})") from None


class PodFileStore:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)

    def path(self, uid: str) -> Path:
        # UIDs are validated to [A-Za-z0-9._-] by the manifest reader; never a path separator
        if not uid or "/" in uid or uid in (".", ".."):
            raise ValueError(f"bad pod uid {uid!r}")
        return self.dir / f"{uid}{SUFFIX}"

    def load(self, accept_loss: bool = False) -> list[PodRecord]:
        if not self.dir.is_dir():
            return []
        records: list[PodRecord] = []
        bad: list[tuple[Path, str]] = []
        for p in sorted(self.dir.iterdir()):
            if p.name.startswith(".") or not p.name.endswith(SUFFIX):
                continue  # temp files of an interrupted write, evidence kept aside
            try:
                rec = decode(p.read_bytes())
                if p.name != f"{rec.uid}{SUFFIX}":
                    raise RegistryStateError(f"holds pod uid {rec.uid!r}, not the one its name says")
            except RegistryStateError as e:
                bad.append((p, str(e)))
                continue
            except OSError as e:
                bad.append((p, e.strerror or str(e)))
                continue
            records.append(rec)
        if bad:
            what = "; ".join(f"{p}: {why}" for p, why in bad)
            if not accept_loss:
                raise RegistryStateError(
                    f"workload registry record(s) cannot be used: {what}. The pods they held and their CPUs and "
                    f"devices are unknown. Stop those workloads, then either delete the file(s) or start hwagent with "
                    f"[workloads] accept_state_loss = true (each bad file is then kept as <name>.corrupt-<time>)."
                )
            for p, why in bad:
                aside = set_aside(p)
                log.warning("registry record discarded", path=p, kept_as=aside, reason=why)
        records.sort(key=lambda r: (r.pod.admitted_at, r.key))
        return records

    def put(self, record: PodRecord) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(self.path(record.uid), encode(record))

    def delete(self, uid: str) -> None:
        try:
            self.path(uid).unlink()
        except FileNotFoundError:
            return
        fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
