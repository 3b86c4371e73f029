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
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from agent.runtime.lognames import LOGS, log_dir_name, log_file_name
from agent.safepath import open_dir, open_file, opened_dir

if TYPE_CHECKING:  # an annotation only: `hwagent logs` must not import the contracts (test_cli_imports)
    from agent.contracts.pods import RunAs

__all__ = ["LOGS", "DIR_MODE", "LOGS_MODE", "log_dir", "log_dir_name", "log_file_name", "prepare_log_file"]

DIR_MODE = 0o700
#: ``<root>/logs`` itself: searchable (a user reaches its own pod's directory), not listable
LOGS_MODE = 0o711


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
