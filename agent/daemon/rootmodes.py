"""Who may read what under the root dir, decided in one place and applied at every start.

The root dir holds two kinds of things. What users reach: the sockets of the socket group
(``cli.sock``, ``admission.sock``, 0660 root:<group>, set where they are bound), ``logs/``
(0711, each pod's directory its user's own, 0700); ``hwagent.pid`` is the root-dir lock, made
0600 by ``PidFile`` (any user who may open a file may flock it). And root's state, which names every user's pods and devices:
the advisor's decisions, the DRA claim files, the eviction record, the runtime's and the
registry's records, the checkpoints. That state is root's alone: directories 0700, files
0600 (issue 32 item 7: a local user in no group read ``advisor/decisions.jsonl`` and the DRA
claim files, 0644 in 0755 directories, and listed the root dir).

The root dir itself is 0711: anyone may pass (a pod running as a user who is not in the
socket group opens its log as that user, through ``<root>/logs``), nobody but root lists it.

Root dirs made by an earlier version are tightened here at start: modes only lose bits
(an operator's stricter choice stays), links are never followed, and only the directories
below hold root's state (``ROOT_ONLY``); everything else keeps what its owner set.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

__all__ = ["ROOT_MODE", "ROOT_ONLY", "PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "tightened", "tighten_root"]

#: the root dir: traversable by all (users' pods reach their logs), listed by root only
ROOT_MODE = 0o711
#: directories of root's state (created 0700 by their owners; earlier versions made some 0755)
ROOT_ONLY: tuple[str, ...] = ("advisor", "dra", "dra-state", "pressure", "memory", "runtime", "workloads",
                              "manifests")
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def tightened(mode: int, most: int) -> int:
    """``mode`` with every bit ``most`` lacks dropped: never wider than before, never wider than ``most``."""
    return stat.S_IMODE(mode) & most


def _narrow(path: str | Path, st: os.stat_result, most: int, changed: list[str]) -> None:
    want = tightened(st.st_mode, most)
    if want != stat.S_IMODE(st.st_mode):
        os.chmod(path, want, follow_symlinks=False)
        changed.append(f"{path} {oct(stat.S_IMODE(st.st_mode))}->{oct(want)}")


def tighten_root(root: Path, private: Iterable[str] = ROOT_ONLY) -> list[str]:
    """Narrow the root dir to ``ROOT_MODE`` and every directory and regular file under the
    ``private`` subdirectories to 0700/0600; returns what changed ("path old->new"). Links
    are neither followed nor changed; a subdirectory that is absent is skipped."""
    changed: list[str] = []
    _narrow(root, os.lstat(root), ROOT_MODE, changed)
    for name in private:
        top = root / name
        try:
            st = os.lstat(top)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue  # a link or a file where a directory belongs: its owner refuses it
        _narrow(top, st, PRIVATE_DIR_MODE, changed)
        _tighten_below(str(top), changed)
    return changed


def _tighten_below(top: str, changed: list[str]) -> None:
    """Every directory (0700 at most) and regular file (0600 at most) below ``top``, links
    neither followed nor changed. ``os.scandir``'s entry gives the type without a syscall and
    one ``lstat`` for the mode (``os.walk`` plus an ``lstat`` per name cost twice: a restart
    with 5,000 pods walks 5,000 records, issue 37 item 17)."""
    stack = [top]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue  # as os.walk did: a directory gone or unreadable meanwhile is skipped
        with it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    _narrow(e.path, e.stat(follow_symlinks=False), PRIVATE_DIR_MODE, changed)
                    stack.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    est = e.stat(follow_symlinks=False)
                    if est.st_mode & 0o7177:  # a file already 0600 or narrower (the common case): nothing to do
                        _narrow(e.path, est, PRIVATE_FILE_MODE, changed)
