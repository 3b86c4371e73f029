"""Where a pod's container logs live: ``<root>/logs/<namespace>_<name>/<container>.log``.

The directory name comes from ``agent.diskname`` (unchanged for every name
that fits, a readable prefix and a hash for the longest pod names), so the
runtime that writes the logs and ``hwagent logs`` that reads them compute the
same place. Directories are made through ``agent.safepath``: no link under the
root dir is followed. ``<root>/logs`` is root's, 0711: anyone may pass through
it, nobody but root may list it (the names would list the pods that run here).
A pod's directory and its log files belong to the user the pod runs as (0700,
0600; root's for a pod without a user), so ``hwagent logs`` run by that user
reads them and nobody else does. The user may put links in its own directory;
hwagent refuses one where it makes the log (``safepath``), and the shim opens and
rotates the log with the user's filesystem uid and never through a link, so a
link reaches nothing the user could not write itself. A directory last used by
another user (a pod name reused after ``rm``) has its files removed before it
changes hands: they are the earlier owner's logs.

A pod's logs live as long as the pod (``docker rm`` removes a container's log):
``remove_log_dir`` takes the directory when the pod is removed, and ``log_dir_bytes``
measures it for the per-user cap and the retention of ended pods
(``agent.workloads.retention``). The directory is the user's, so both walk it from
directory descriptors (``O_NOFOLLOW``, ``unlinkat``, ``fstatat`` without following):
a symbolic link is removed as a name and never entered, a hard link loses only its
name here (the file keeps its bytes under its other names), and a subdirectory is
entered only when it is the directory owner's, at most ``MAX_DEPTH`` deep.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from agent.runtime.lognames import LOGS, log_dir_name, log_file_name
from agent.safepath import open_dir, open_file, opened_dir

if TYPE_CHECKING:  # an annotation only: `hwagent logs` must not import the contracts (test_cli_imports)
    from agent.contracts.pods import RunAs

__all__ = ["LOGS", "DIR_MODE", "LOGS_MODE", "MAX_DEPTH", "LogDirs", "log_dir", "log_dir_name", "log_file_name",
           "prepare_log_file", "remove_log_dir", "log_dir_bytes", "log_dir_names"]

DIR_MODE = 0o700
#: ``<root>/logs`` itself: searchable (a user reaches its own pod's directory), not listable
LOGS_MODE = 0o711
#: subdirectories a user made in its log directory are walked this deep, no deeper
MAX_DEPTH = 8
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def log_dir(root: Path, namespace: str, name: str) -> Path:
    return Path(root) / LOGS / log_dir_name(namespace, name)


def prepare_log_file(root: Path, namespace: str, name: str, container: str, user: RunAs | None = None) -> Path:
    """Make the pod's log directory and its container's log file (0600), both the
    pod's user's (root's without ``user``), without following a link on the way;
    returns the file's path for the shim, which appends to it. A link planted at
    the directory or the file raises ``agent.safepath.UnsafePathError`` and nothing
    is written."""
    d = log_dir(root, namespace, name)
    fname = log_file_name(container)
    uid = user.uid if user is not None and user.uid is not None else 0
    gid = user.gid if user is not None and user.gid is not None else 0
    with opened_dir(root, (LOGS,), create=True, mode=LOGS_MODE):
        pass  # made (or narrowed to) 0711 and checked for a link before the pod's directory below it
    dfd = open_dir(Path(root) / LOGS, (d.name,), create=True, mode=DIR_MODE)
    try:
        _hand_over(dfd, uid, gid)
        fd = open_file(dfd, fname, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600, where=d, root=Path(root))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(f"{d / fname} is not a regular file; move it away")
            if (st.st_uid, st.st_gid) != (uid, gid):
                os.fchown(fd, uid, gid)
        finally:
            os.close(fd)
    finally:
        os.close(dfd)
    return d / fname


def _hand_over(dfd: int, uid: int, gid: int) -> None:
    """The pod's log directory, ``uid``'s: one another user owned loses its files first."""
    st = os.fstat(dfd)
    if (st.st_uid, st.st_gid) == (uid, gid):
        return
    if st.st_uid != uid:
        for entry in os.listdir(dfd):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(entry, dir_fd=dfd)
    os.fchown(dfd, uid, gid)


def _open_logs(root: Path) -> int | None:
    """``<root>/logs`` (no link followed on the way), or None when there is none."""
    try:
        return open_dir(Path(root), (LOGS,), tighten=False)
    except FileNotFoundError:
        return None


def _open_sub(dfd: int, name: str, owner: int | None) -> int | None:
    """The directory ``name`` in ``dfd``, never through a link; None for anything else (a
    link, a file, a directory that is not ``owner``'s, one gone meanwhile)."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            return None
        raise
    if owner is not None and os.fstat(fd).st_uid != owner:
        os.close(fd)
        return None
    return fd


def _empty(dfd: int, owner: int, depth: int) -> bool:
    """Unlink every name in the directory ``dfd`` (a link is a name like any other), entering
    only ``owner``'s subdirectories, ``MAX_DEPTH`` deep; True when it is empty now."""
    left = False
    for entry in os.listdir(dfd):
        try:
            os.unlink(entry, dir_fd=dfd)  # unlinkat: a link goes, never what it points at
            continue
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            pass
        sub = _open_sub(dfd, entry, owner) if depth < MAX_DEPTH else None
        if sub is None:
            left = True
            continue
        try:
            emptied = _empty(sub, owner, depth + 1)
        finally:
            os.close(sub)
        try:
            if emptied:
                os.rmdir(entry, dir_fd=dfd)
                continue
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno != errno.ENOTEMPTY:
                raise
        left = True
    return not left


def remove_log_dir(root: Path, namespace: str, name: str) -> bool:
    """Remove the pod's log directory and everything in it that is the pod's user's to
    remove, without following a link (see the module's docstring). True when something
    was there. What cannot go (a directory deeper than ``MAX_DEPTH`` or another user's
    the owner moved in) is left, and the directory with it: a ``FileExistsError``
    names it."""
    return _remove_dir(root, log_dir_name(namespace, name))


def _remove_dir(root: Path, dname: str) -> bool:
    lfd = _open_logs(root)
    if lfd is None:
        return False
    try:
        try:
            dfd = os.open(dname, _DIR_FLAGS, dir_fd=lfd)
        except FileNotFoundError:
            return False
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            os.unlink(dname, dir_fd=lfd)  # a link or a file where the directory goes: the name only
            return True
        try:
            emptied = _empty(dfd, os.fstat(dfd).st_uid, 0)
        finally:
            os.close(dfd)
        if not emptied:
            raise FileExistsError(errno.ENOTEMPTY, "left what its user cannot have written (a directory "
                                  f"deeper than {MAX_DEPTH}, or another user's)", str(Path(root) / LOGS / dname))
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(dname, dir_fd=lfd)
        return True
    finally:
        os.close(lfd)


def _bytes(dfd: int, owner: int | None, depth: int) -> int:
    total = 0
    for entry in os.listdir(dfd):
        try:
            st = os.stat(entry, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
        elif stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
            sub = _open_sub(dfd, entry, owner)
            if sub is not None:
                try:
                    total += _bytes(sub, owner, depth + 1)
                finally:
                    os.close(sub)
    return total


def log_dir_bytes(root: Path, namespace: str, name: str) -> int:
    """The bytes of the regular files in the pod's log directory (its logs, times files and
    rotations, and whatever its user put there), 0 when it has none; no link followed."""
    lfd = _open_logs(root)
    if lfd is None:
        return 0
    try:
        dfd = _open_sub(lfd, log_dir_name(namespace, name), None)
        if dfd is None:
            return 0
        try:
            return _bytes(dfd, os.fstat(dfd).st_uid, 0)
        finally:
            os.close(dfd)
    finally:
        os.close(lfd)


def log_dir_names(root: Path) -> list[str]:
    """The names in ``<root>/logs`` (every pod's log directory, and anything else there)."""
    lfd = _open_logs(root)
    if lfd is None:
        return []
    try:
        return os.listdir(lfd)
    finally:
        os.close(lfd)


class LogDirs:
    """The pods' log directories under one root dir, as admission removes and measures
    them (``agent.workloads.admission.PodLogs``). Blocking: call from an executor."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def remove(self, namespace: str, name: str) -> bool:
        return remove_log_dir(self.root, namespace, name)

    def size(self, namespace: str, name: str) -> int:
        return log_dir_bytes(self.root, namespace, name)

    def exists(self, namespace: str, name: str) -> bool:
        return os.path.lexists(log_dir(self.root, namespace, name))

    def remove_orphans(self, keep: set[str]) -> list[str]:
        """Remove every log directory whose name is not in ``keep`` (the directory names of
        the pods the registry has): those a removal did not finish (a crash) or an older
        hwagent left after ``rm``. The names removed."""
        gone = []
        for dname in log_dir_names(self.root):
            if dname in keep:
                continue
            with contextlib.suppress(FileExistsError, FileNotFoundError):
                if _remove_dir(self.root, dname):
                    gone.append(dname)
        return gone
