"""The runtime's files under ``<root>/runtime/<pod uid>/``: what survives a daemon restart.

Per container, a directory the shim writes into: ``pid`` ("<shim pid> <workload
pid>", once the workload exec'ed) and ``exit`` (its status, once it ended or
failed to start). Both are replaced atomically by rename and never fsynced:
they describe processes, which do not survive a power cut either. Per pod,
``pod.json`` (checksummed over canonical JSON as agent.statefile does, and
replaced atomically): how far the init containers got, restart counts and
back-off, and a stop in progress, so a restarted daemon continues the life
cycle where it was. Unlike the checkpoints it is not fsynced: a daemon killed
with SIGKILL loses nothing the kernel's page cache holds, and a power cut that
would lose it also ends every process it describes (the registry, which is
durable, then decides what runs again). That keeps an fsync (~5 ms here) off
every launch and stop.

Every directory here is made and entered through ``agent.safepath``: from the
root dir down no symbolic link is followed (a planted one is refused), and
each is owner-only (0700, files 0600; an older root dir's 0755 is narrowed on
the next write), since the names list which pods and UIDs run. The pod's
directory is named by ``agent.diskname`` from its UID, and each container's by
its name (both unchanged for every name admission accepts).
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import os

from agent.diskname import disk_name
from agent.safepath import open_dir, open_file, opened_dir, replace_file
from agent.statefile import canonical_json, sha256_of

__all__ = ["DIR_MODE", "STATE_DIR", "ExitInfo", "parse_exit", "ContainerFiles", "PodRecord", "ContainerRecord", "PodFiles"]

FORMAT = 1


@dataclass(frozen=True)
class ExitInfo:
    #: the exit code the kubelet would show: the code, or 128 + signal
    exit_code: int
    signal: int | None = None
    #: set when the workload never ran: "<stage> <errno> <message>" from the shim
    start_error: str | None = None
    finished_at: float | None = None
    message: str = ""
    #: the memory cgroup counted an OOM kill in this run (read before the cgroup was removed)
    oom: bool = False

    @property
    def started(self) -> bool:
        return self.start_error is None


def parse_exit(text: str, finished_at: float | None = None) -> ExitInfo:
    words = text.strip().split(" ", 3)
    if words[0] == "exited" and len(words) >= 2:
        return ExitInfo(int(words[1]), finished_at=finished_at)
    if words[0] == "signaled" and len(words) >= 2:
        return ExitInfo(128 + int(words[1]), signal=int(words[1]), finished_at=finished_at)
    if words[0] == "error":
        stage = words[1] if len(words) > 1 else "start"
        msg = words[3] if len(words) > 3 else text.strip()
        return ExitInfo(128, start_error=f"{stage}: {msg}", finished_at=finished_at)
    raise ValueError(f"unrecognised exit record {text!r}")


#: under the root dir: one directory per pod (``WorkloadRuntime.state_root``)
STATE_DIR = "runtime"
#: owner-only: the directory names list the pods and UIDs that run here
DIR_MODE = 0o700


class ContainerFiles:
    def __init__(self, path: Path, trusted: Path | None = None) -> None:
        self.path = path
        #: the directory below which no link is followed (the root dir; default: the parent)
        self.trusted = trusted if trusted is not None else path.parent

    def prepare(self) -> None:
        """A fresh run: the directory exists (no link followed on the way), no pid or exit of an earlier run."""
        with opened_dir(self.trusted, self.path.relative_to(self.trusted), create=True, mode=DIR_MODE) as dfd:
            for name in ("pid", "exit"):
                try:
                    os.unlink(name, dir_fd=dfd)
                except FileNotFoundError:
                    pass

    def pids(self) -> tuple[int, int] | None:
        try:
            a, b = (self.path / "pid").read_text().split()
            return int(a), int(b)
        except (OSError, ValueError):
            return None

    def exit(self) -> ExitInfo | None:
        p = self.path / "exit"
        try:
            return parse_exit(p.read_text(), p.stat().st_mtime)
        except (OSError, ValueError):
            return None


@dataclass
class ContainerRecord:
    restarts: int = 0
    backoff_s: float = 0.0
    #: whether this (init) container completed
    done: bool = False
    last_exit_code: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    #: bind targets the runtime had to create on the host (removed when the pod ends)
    created: list[str] = field(default_factory=list)


@dataclass
class PodRecord:
    uid: str
    key: str
    containers: dict[str, ContainerRecord] = field(default_factory=dict)
    #: all init containers completed and app containers were started at least once
    running: bool = False
    #: set when a stop began: (reason, message); a restart finishes the stop
    stopping: tuple[str, str] | None = None
    #: when that stop's grace period ends (wall clock): a restart grants the workload
    #: what is left of it instead of killing at once
    stop_deadline: float | None = None
    #: the grace period that stop was given (bounds the wait when the clock jumped back)
    stop_grace_s: float | None = None

    def container(self, name: str) -> ContainerRecord:
        return self.containers.setdefault(name, ContainerRecord())

    def to_json(self) -> dict[str, Any]:
        return {"uid": self.uid, "key": self.key, "running": self.running,
                "stopping": list(self.stopping) if self.stopping else None,
                "stop_deadline": self.stop_deadline, "stop_grace_s": self.stop_grace_s,
                "containers": {k: dict(vars(v)) for k, v in sorted(self.containers.items())}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PodRecord:
        stopping = d.get("stopping")
        return cls(uid=d["uid"], key=d["key"], running=bool(d.get("running")),
                   stopping=(str(stopping[0]), str(stopping[1])) if stopping else None,
                   stop_deadline=_finite_or_none(d.get("stop_deadline"), "stop_deadline"),
                   stop_grace_s=_finite_or_none(d.get("stop_grace_s"), "stop_grace_s"),
                   containers={k: ContainerRecord(**v) for k, v in d.get("containers", {}).items()})


def _finite_or_none(value: Any, name: str) -> float | None:
    """A number from disk, or nothing (a record from before the field was kept)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} is not a finite number: {value!r}")
    return float(value)


class PodFiles:
    """``<root>/<uid>/``: ``root`` is ``<root dir>/runtime``; from its parent (the root
    dir) down, no link is followed."""

    def __init__(self, root: Path, uid: str) -> None:
        self.trusted = root.parent
        self.path = root / disk_name(uid)

    def container(self, name: str) -> ContainerFiles:
        return ContainerFiles(self.path / disk_name(name), self.trusted)

    @staticmethod
    def encode(rec: PodRecord) -> bytes:
        body = rec.to_json()
        doc = {"version": FORMAT, "checksum": sha256_of(canonical_json(body)), "pod": body}
        return json.dumps(doc, sort_keys=True).encode()

    def write(self, payload: bytes) -> None:
        dfd = open_dir(self.trusted, self.path.relative_to(self.trusted), create=True, mode=DIR_MODE)
        try:
            replace_file(dfd, "pod.json", payload, 0o600)
        finally:
            os.close(dfd)

    def save(self, rec: PodRecord) -> None:
        self.write(self.encode(rec))

    def load(self) -> PodRecord | None:
        """The pod's record; None when absent or corrupt (the runtime then
        re-derives what it can from the container files)."""
        try:
            with opened_dir(self.trusted, self.path.relative_to(self.trusted), mode=DIR_MODE) as dfd:
                fd = open_file(dfd, "pod.json", os.O_RDONLY, where=self.path, root=self.trusted)
            with os.fdopen(fd, "rb") as f:
                doc = json.loads(f.read())
            body = doc["pod"]
            if doc.get("version") != FORMAT or doc.get("checksum") != sha256_of(canonical_json(body)):
                return None
            return PodRecord.from_json(body)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
