"""Who holds a flock on a file, and whether the holder may be ignored (a squatter).

``flock`` needs no write access: any local user who can open a file read-only can take an
exclusive lock on it, and the daemon's lock files are readable by design (the CLI of every
user reads the claims to find the daemon). A user in no group opened them, waited on the
lock while the daemon ran, got it the moment the daemon stopped, and the next start failed
("another hwagent (pid N) is running", issue 32, found in review). hwagent's daemons all run
as root, so a lock whose every holder is a process of another user is nobody's: the daemon
unlinks that file and locks a fresh one in its place (the squatter keeps a lock on an inode
no name reaches). The holders are read from ``/proc/locks`` (``FLOCK`` lines name the pid
that took the lock and the file's device and inode); parsing is pure.
"""

from __future__ import annotations

import os

__all__ = ["flock_holders", "holders_of", "squatted"]

PROC_LOCKS = "/proc/locks"


def flock_holders(text: str, major: int, minor: int, inode: int) -> list[int]:
    """The pids holding a granted ``FLOCK`` on the file (``/proc/locks`` text; blocked waiters,
    the ``->`` lines, hold nothing)."""
    want = f"{major:02x}:{minor:02x}:{inode}"
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->" or fields[1] != "FLOCK":
            continue
        if fields[5] == want:
            try:
                out.append(int(fields[4]))
            except ValueError:
                continue
    return out


def holders_of(fd: int, proc_locks: str = PROC_LOCKS) -> list[int]:
    """The pids holding a flock on the file open at ``fd``; [] when /proc/locks cannot be read."""
    st = os.fstat(fd)
    try:
        with open(proc_locks, encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    return flock_holders(text, os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)


def _uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def squatted(fd: int, proc_locks: str = PROC_LOCKS) -> bool:
    """True when the file at ``fd`` is flocked and no holder is a live process of this daemon's
    user (root): a local user's lock on a file the daemon must take. A holder whose pid is gone
    counts as no daemon (a daemon holds its locks in its own process until it exits; a user's
    process that forked and exited leaves its child holding under the parent's pid). False when
    a holder is root's (a daemon, or a root process: the caller's conflict stands) or when no
    holder is known (/proc/locks unreadable)."""
    holders = holders_of(fd, proc_locks)
    me = os.geteuid()
    return bool(holders) and all(_uid(p) != me for p in holders)
