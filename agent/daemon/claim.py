"""One daemon per cgroup subtree and per CPU: a machine-wide claim, held under flock.

The root-dir lock (``hwagent.pid``) keeps two daemons off one root dir, but a
second daemon with another root dir and port would otherwise bind, enforce and
kill in the same workload cgroups and hand out the same CPUs, and the two would
undo each other's cpusets and kill each other's pods as "foreign". So before any
component touches a cgroup the daemon claims what it manages, in a directory
every daemon on the machine looks at (``[daemon] lock_dir``, ``/run/hwagent/locks``):
one file per cgroup subtree, named after the subtree's full path, holding the
holder's pid, root dir, config file, subtrees and CPUs, and kept under an exclusive flock for
as long as the daemon runs. The kernel drops a flock when its holder exits, kill -9
included, so a file nobody holds is stale and is taken over.

A new daemon refuses to start when a live holder manages the same subtree, a
subtree nested in one of its own, or any CPU of its own; the refusal names the
holder's pid and root dir. Claims are read and written under one short lock on
the directory itself (``.lock``), so two daemons starting at once cannot both see
the other's claim missing.

The decisions (what a daemon manages, which claim conflicts) are pure functions;
``ClaimLock`` is the thin adapter over the files.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.cgroups.config import CGROUPS_SECTION
from agent.cgroups.paths import nested_subtrees
from agent.cpu.config import CPU_SECTION
from agent.daemonconfig import DAEMON_SECTION
from agent.cpuset import CPUSet, CPUSetError
from agent.daemon.lockholders import squatted
from agent.daemon.running import CLAIM_SUFFIX, MAX_CLAIM_BYTES, try_flock
from agent.topology.model import Topology

__all__ = [
    "Claim",
    "ClaimConflict",
    "ClaimLock",
    "find_conflict",
    "lock_file_name",
    "managed_claim",
]

#: the directory's own lock, held only while claims are read and written
_DIR_LOCK = ".lock"
_SUFFIX = CLAIM_SUFFIX
#: how long a start waits for another daemon's claim step (milliseconds of work) before giving up
DIR_LOCK_TIMEOUT_S = 10.0
_MAX_CLAIM_BYTES = MAX_CLAIM_BYTES


class ClaimConflict(Exception):
    """Another live daemon manages what this one would; the message names it."""


@dataclass(frozen=True)
class Claim:
    """What one daemon manages: cgroup subtrees under one cgroup root, and CPUs."""

    pid: int
    root_dir: str
    cgroup_root: str
    subtrees: tuple[str, ...]
    cpus: CPUSet
    #: the config file the daemon runs with ("" for the embedded defaults): the CLI reads it
    #: without --config (agent.daemon.running)
    config: str = ""

    def to_json(self) -> str:
        return json.dumps({"pid": self.pid, "root_dir": self.root_dir, "cgroup_root": self.cgroup_root,
                           "subtrees": list(self.subtrees), "cpus": str(self.cpus), "config": self.config},
                          sort_keys=True) + "\n"

    @staticmethod
    def from_json(text: str) -> Claim:
        """ValueError when the text is not a claim (a file half-written by a holder killed at that instant)."""
        try:
            d: dict[str, Any] = json.loads(text)
            return Claim(int(d["pid"]), str(d["root_dir"]), str(d["cgroup_root"]),
                         tuple(str(s) for s in d["subtrees"]), CPUSet.parse(str(d["cpus"])), str(d.get("config") or ""))
        except (ValueError, KeyError, TypeError, CPUSetError) as e:
            raise ValueError(f"not a claim: {e}") from None


def _norm(subtree: str) -> str:
    return "/" + subtree.strip("/")


def managed_claim(config: Any, topology: Topology, pid: int) -> Claim:
    """What the daemon with this config manages on this machine.

    Subtrees: every workload root ([cgroups] workload_roots plus the runtime's
    subtree), the cgroups it binds, enforces and kills in. CPUs: those the CPU
    policy hands to workloads, every CPU but the reserved ones; none when the
    policy is off. The reserved set is computed as the policy computes it; a
    reserved setting the policy will refuse claims every CPU (the daemon then
    fails at the CPU component anyway, having claimed too much rather than too little).
    """
    from agent.cgroups.config import workload_roots
    from agent.cpu.calculator import TopoIndex
    from agent.cpu.component import options_from_config
    from agent.cpu.policy import reserved_cpus

    subtrees = tuple(sorted({_norm(s) for s in workload_roots(config)}))
    cpu = config[CPU_SECTION]
    cpus = CPUSet()
    if cpu.enabled:
        idx = TopoIndex(topology)
        try:
            reserved = reserved_cpus(idx, options_from_config(cpu, len(idx.all)))
        except ValueError:
            reserved = CPUSet()
        cpus = idx.all_cpuset - reserved
    root = os.path.realpath(config[CGROUPS_SECTION].root)
    path = getattr(config, "path", None)
    return Claim(pid, os.path.abspath(str(config[DAEMON_SECTION].root_dir)), root, subtrees, cpus,
                 os.path.abspath(path) if path else "")


def _nested(a: str, b: str) -> bool:
    """Whether one subtree is the other or lies inside it (``/a`` and ``/a/b``; not ``/a`` and ``/ab``)."""
    return nested_subtrees(a, b)


def find_conflict(mine: Claim, others: Iterable[Claim]) -> str | None:
    """The one line that says why ``mine`` cannot run beside ``others`` (live holders), or None."""
    for other in others:
        who = f"another hwagent (pid {other.pid}, root dir {other.root_dir})"
        if other.cgroup_root == mine.cgroup_root:
            for s in mine.subtrees:
                for o in other.subtrees:
                    if _nested(s, o):
                        what = f"cgroup subtree {o}" + ("" if s == o else f" (this daemon's {s} overlaps it)")
                        return (f"{who} already manages {what} under {other.cgroup_root}; give this daemon "
                                f"disjoint [cgroups] workload_roots and runtime_subtree, or stop the other")
        shared = mine.cpus & other.cpus
        if shared:
            return (f"{who} already manages CPUs {other.cpus}, and this daemon would manage {mine.cpus} "
                    f"(both: {shared}); give the daemons disjoint CPUs with [cpu] reserved_cpu_list, or stop the other")
    return None


def lock_file_name(cgroup_root: str, subtree: str) -> str:
    """The claim file of one subtree: its full cgroup path, escaped to one file name
    (``/sys/fs/cgroup`` + ``/hwagent.slice`` -> ``sys-fs-cgroup-hwagent.slice.lock``).

    As systemd escapes paths: ``/`` becomes ``-``; a ``-``, a leading ``.`` and every
    byte outside ``[A-Za-z0-9_.:]`` becomes ``\\xNN``, so two paths never share a name.
    """
    path = (cgroup_root.rstrip("/") + "/" + subtree.strip("/")).strip("/")
    out = []
    for i, b in enumerate(path.encode()):
        c = chr(b)
        if c == "/":
            out.append("-")
        elif (c.isascii() and (c.isalnum() or c in "_:")) or (c == "." and i > 0):
            out.append(c)
        else:
            out.append(f"\\x{b:02x}")
    return "".join(out) + _SUFFIX


_flock = try_flock  # flock without blocking: False when another open file holds it


def _fresh(path: Path, mode: int) -> int:
    """A new file (a new inode) at ``path`` in place of the one there: a lock held on the old
    one no longer stands in the way."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode)


class ClaimLock:
    """The files of one daemon's claim under ``lock_dir``; ``acquire`` then ``release``."""

    def __init__(self, lock_dir: str | Path) -> None:
        self.lock_dir = Path(lock_dir)
        self._held: dict[Path, int] = {}

    @property
    def held(self) -> bool:
        return bool(self._held)

    def acquire(self, claim: Claim) -> None:
        """Take the claim, or raise ClaimConflict naming the live holder (nothing taken, nothing changed).

        OSError (with the path) when the lock dir cannot be made or read."""
        self.lock_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        with self._dir_locked():
            holders = self._live_claims()
            reason = find_conflict(claim, holders)
            if reason is not None:
                raise ClaimConflict(reason)
            try:
                for subtree in claim.subtrees:
                    self._take(self.lock_dir / lock_file_name(claim.cgroup_root, subtree), claim)
            except BaseException:
                self._close_all(unlink=True)
                raise

    def release(self) -> None:
        """Remove the claim's files, then drop their locks (exit drops them anyway, kill -9 included)."""
        if not self._held:
            return
        try:
            with self._dir_locked():
                self._close_all(unlink=True)
        except (OSError, ClaimConflict):
            self._close_all(unlink=False)  # the files stay, stale: the next daemon takes them over

    # --- files --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _dir_locked(self):
        # root's alone (0600): only daemons take it; one an earlier version left 0644 is narrowed,
        # and a lock only another user's process holds on it (opened while it was 0644) is ignored
        # by locking a fresh file in its place (agent.daemon.lockholders)
        path = self.lock_dir / _DIR_LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            deadline = time.monotonic() + DIR_LOCK_TIMEOUT_S
            while not _flock(fd, fcntl.LOCK_EX):
                if squatted(fd):
                    new = _fresh(path, 0o600)
                    os.close(fd)
                    fd = new
                    continue
                if time.monotonic() > deadline:
                    raise ClaimConflict(f"{self.lock_dir / _DIR_LOCK} stayed locked for {DIR_LOCK_TIMEOUT_S:g} s: "
                                        "another hwagent is stuck starting; stop it and try again")
                time.sleep(0.05)
            yield
        finally:
            os.close(fd)

    def _live_claims(self) -> list[Claim]:
        """The claims whose holders are alive; stale files (holder gone) are removed on the way."""
        out = []
        for path in sorted(self.lock_dir.glob("*" + _SUFFIX)):
            if path in self._held or path.name.startswith("."):  # ours, or the directory's own lock
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            except FileNotFoundError:
                continue
            try:
                # nobody holds it (its daemon is gone), or only another user's process does (a
                # squatter: any user may lock a file it can read): stale either way
                if _flock(fd, fcntl.LOCK_SH) or squatted(fd):
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                    continue
                text = os.pread(fd, _MAX_CLAIM_BYTES, 0).decode(errors="replace")
            finally:
                os.close(fd)
            try:
                out.append(Claim.from_json(text))
            except ValueError:
                # held but unreadable: someone holds it, so it counts, as an unknown holder of that path
                raise ClaimConflict(f"{path} is held by another process but does not say who: "
                                    "find the holder (fuser, lsof) and stop it") from None
        return out

    def _take(self, path: Path, claim: Claim) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        if not _flock(fd, fcntl.LOCK_EX):  # _live_claims saw none: only a process ignoring the dir lock
            os.close(fd)
            raise ClaimConflict(f"{path} is held by another process; find it (fuser, lsof) and stop it")
        os.ftruncate(fd, 0)
        os.pwrite(fd, claim.to_json().encode(), 0)
        self._held[path] = fd

    def _close_all(self, unlink: bool) -> None:
        for path, fd in self._held.items():
            if unlink:
                # unlinked while still held, under the dir lock: nobody opens it meanwhile
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            os.close(fd)
        self._held.clear()
