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

The directory is entered through ``agent.safepath`` from the root dir down:
a symbolic link anywhere on the way (or as a record's file) is refused, never
followed, since a record read from elsewhere would be run as an admitted pod.
It is owner-only (0700, files 0600); a looser one an older hwagent left is
narrowed when the store is opened at start and at every write.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent.diskname import disk_name
from agent.eventlog import get_logger
from agent.safepath import ensure_dir, open_dir, open_file
from agent.statefile import (
    canonical_str, checksum_holds_as_written, release_freed_memory, set_aside, sha256_checksum, sha256_of, write_atomic,
)
from agent.workloads.codec import pod_from_json, pod_to_json, status_from_json, status_to_json
from agent.contracts.pods import AdmittedPod, PodStatus

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
    #: a Remove began: recorded before the pod is stopped, so a daemon killed before the
    #: record is gone finishes the removal after its restart instead of keeping the pod
    removing: bool = False

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
        "removing": r.removing,
    }


def record_from_json(d: dict[str, Any]) -> PodRecord:
    released = d["released"]
    if not isinstance(released, bool):
        raise TypeError("released must be a boolean")
    removing = d.get("removing", False)  # absent in records written before removals were recorded
    if not isinstance(removing, bool):
        raise TypeError("removing must be a boolean")
    return PodRecord(
        pod=pod_from_json(d["pod"]),
        status=status_from_json(d["status"]),
        released=released,
        events=tuple((float(t), str(m)) for t, m in d["events"]),
        removing=removing,
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
    """The canonical JSON of ``{"checksum", "record", "version"}``, the record serialised once:
    the checksum is over the canonical text of the other two keys, which is the document's
    own text after the checksum (sorted keys: "checksum" comes first), so the file is that
    text with the checksum put in front (what ``checksum_holds_as_written`` reads back)."""
    signed = canonical_str({"version": VERSION, "record": record_to_json(record)}).encode()
    return b'{"checksum":"' + sha256_of(signed).encode() + b'",' + signed[1:] + b"\n"


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
    if not checksum_holds_as_written(raw) and doc.get("checksum") != sha256_checksum({"version": VERSION, "record": body}):
        raise RegistryStateError("checksum mismatch, the file is corrupted")
    try:
        return record_from_json(body)  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise RegistryStateError(f"record does not parse ({type(e).__name__}: {e})") from None


#: owner-only: the file names list the UIDs admitted here
DIR_MODE = 0o700


class PodFileStore:
    def __init__(self, directory: str | os.PathLike[str], root_dir: str | os.PathLike[str] | None = None) -> None:
        """``root_dir``: the trusted directory above ``directory`` (hwagent's root dir);
        below it no link is followed. Default: ``directory``'s parent."""
        self.dir = Path(directory)
        self.root = Path(root_dir) if root_dir is not None else self.dir.parent
        self._rel = self.dir.relative_to(self.root).parts

    def path(self, uid: str) -> Path:
        return self.dir / self.file_name(uid)

    @staticmethod
    def file_name(uid: str) -> str:
        # UIDs are validated to [A-Za-z0-9._-] by the manifest reader (then unchanged here);
        # disk_name makes any other string one safe component
        if not uid:
            raise ValueError(f"bad pod uid {uid!r}")
        return f"{disk_name(uid, reserve=len(SUFFIX) + 16)}{SUFFIX}"

    def prepare(self) -> Path:
        """Create the directory (owner-only, no link followed), narrowing a looser mode."""
        return ensure_dir(self.root, self._rel, mode=DIR_MODE)

    def _read(self, dfd: int, name: str) -> bytes:
        fd = open_file(dfd, name, os.O_RDONLY | os.O_NONBLOCK, where=self.dir, root=self.root)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise RegistryStateError("not a regular file")
            # plain reads on the descriptor, no file object per record (a restart reads one
            # file per pod, issue 37 item 17); to the end, whatever fstat said its size was
            chunks: list[bytes] = []
            while chunk := os.read(fd, st.st_size + 1 if not chunks else 1 << 16):
                chunks.append(chunk)
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        finally:
            os.close(fd)

    def load(self, accept_loss: bool = False) -> list[PodRecord]:
        try:
            # at start: walking in also narrows a looser mode an older hwagent left
            dfd = open_dir(self.root, self._rel, mode=DIR_MODE)
        except FileNotFoundError:
            return []
        try:
            return self._load(dfd, accept_loss)
        finally:
            os.close(dfd)

    def _load(self, dfd: int, accept_loss: bool) -> list[PodRecord]:
        records: list[PodRecord] = []
        bad: list[tuple[Path, str]] = []
        for name in sorted(os.listdir(dfd)):
            if name.startswith(".") or not name.endswith(SUFFIX):
                continue  # temp files of an interrupted write, evidence kept aside
            try:
                rec = decode(self._read(dfd, name))
                if name != self.file_name(rec.uid):
                    raise RegistryStateError(f"holds pod uid {rec.uid!r}, not the one its name says")
            except RegistryStateError as e:
                bad.append((self.dir / name, str(e)))
                continue
            except OSError as e:
                bad.append((self.dir / name, e.strerror or str(e)))
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
        release_freed_memory()  # every file's bytes and decoded JSON, freed
        return records

    def put(self, record: PodRecord) -> None:
        self.prepare()
        write_atomic(self.path(record.uid), encode(record))

    def delete(self, uid: str) -> None:
        try:
            dfd = open_dir(self.root, self._rel, mode=DIR_MODE)
        except FileNotFoundError:
            return
        try:
            try:
                os.unlink(self.path(uid).name, dir_fd=dfd)
            except FileNotFoundError:
                return
            os.fsync(dfd)
        finally:
            os.close(dfd)
