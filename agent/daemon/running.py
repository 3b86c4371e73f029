"""Which hwagent daemons run on this machine, and with which root dir and config: read from their claims.

Every daemon holds a claim file per cgroup subtree in the machine-wide lock dir
(``[daemon] lock_dir``, agent.daemon.claim) under an exclusive flock for as
long as it runs, and the file says the holder's pid, root dir and the config
file it was started with. So the daemon stays the one owner of its config: a
command run without ``--config`` or ``--root-dir`` asks the claims which daemon
runs and reads the same file the daemon read, instead of falling back to the
embedded defaults and looking for a socket under a root dir the daemon does not
use (agent.commands._config).

Read-only and cheap (the CLI's start-up, bench/cli.py): a file nobody holds is
a daemon that is gone and is skipped, not removed (the next daemon's claim step
removes it); an unreadable one is skipped too. Imports the standard library
alone; ``choose`` is pure.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os

__all__ = ["Running", "CLAIM_SUFFIX", "running", "choose", "Ambiguous", "try_flock"]

#: a claim file's name ends so (agent.daemon.claim.lock_file_name)
CLAIM_SUFFIX = ".lock"
#: a claim is a few hundred bytes; more is not ours
MAX_CLAIM_BYTES = 64 << 10


class Running:
    """One live daemon as its claim describes it."""

    __slots__ = ("pid", "root_dir", "config")

    def __init__(self, pid: int, root_dir: str, config: str) -> None:
        self.pid, self.root_dir, self.config = pid, root_dir, config

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Running) and (self.pid, self.root_dir, self.config) == (
            other.pid, other.root_dir, other.config)

    def __hash__(self) -> int:
        return hash((self.pid, self.root_dir, self.config))

    def __repr__(self) -> str:
        return f"Running(pid={self.pid}, root_dir={self.root_dir!r}, config={self.config!r})"


class Ambiguous(Exception):
    """Several daemons run and none is the default one: the caller must name a root dir."""


def try_flock(fd: int, op: int) -> bool:
    """A non-blocking flock: True if taken, False if someone else holds a conflicting one."""
    try:
        fcntl.flock(fd, op | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _held_text(path: str) -> str | None:
    """The claim file's text when a live daemon holds it, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if try_flock(fd, fcntl.LOCK_SH):
            return None  # nobody holds it: its daemon is gone
        return os.pread(fd, MAX_CLAIM_BYTES, 0).decode(errors="replace")
    finally:
        os.close(fd)


def running(lock_dir: str) -> list[Running]:
    """The daemons that hold claims under ``lock_dir`` (one entry per daemon, by pid)."""
    try:
        names = sorted(os.listdir(lock_dir))
    except OSError:
        return []
    seen: dict[int, Running] = {}
    for name in names:
        if not name.endswith(CLAIM_SUFFIX) or name.startswith("."):
            continue
        text = _held_text(os.path.join(lock_dir, name))
        if text is None:
            continue
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            d = json.loads(text)
            pid = int(d["pid"])
            seen.setdefault(pid, Running(pid, str(d["root_dir"]), str(d.get("config") or "")))
    return list(seen.values())


def choose(daemons: list[Running], default_root: str, root_dir: str | None = None) -> Running | None:
    """The daemon a command without ``--config`` talks to: the one with ``root_dir`` when given;
    else the one on the default root dir, else the only one; None when none runs (the defaults
    then apply). Ambiguous when several run and none is on the default root dir."""
    if root_dir is not None:
        want = os.path.normpath(root_dir)
        return next((d for d in daemons if os.path.normpath(d.root_dir) == want), None)
    on_default = [d for d in daemons if os.path.normpath(d.root_dir) == os.path.normpath(default_root)]
    if on_default:
        return on_default[0]
    if len(daemons) == 1:
        return daemons[0]
    if daemons:
        listed = ", ".join(f"{d.root_dir} (pid {d.pid})" for d in sorted(daemons, key=lambda d: d.root_dir))
        raise Ambiguous(f"several hwagent daemons run ({listed}); choose one with --root-dir DIR")
    return None
