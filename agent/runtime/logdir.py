"""Where a pod's container logs live: ``<root>/logs/<namespace>_<name>/<container>.log``.

The directory name comes from ``agent.diskname`` (unchanged for every name
that fits, a readable prefix and a hash for the longest pod names), so the
runtime that writes the logs and ``hwagent logs`` that reads them compute the
same place. Directories are made through ``agent.safepath``: no link under the
root dir is followed, and they are owner-only (0700), since their names list
the pods that run here. Pods run as root (there is no ``runAsUser`` yet), so
nobody else needs to read them.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.diskname import disk_name
from agent.safepath import open_file, opened_dir

__all__ = ["LOGS", "DIR_MODE", "log_dir", "log_dir_name", "log_file_name", "prepare_log_file"]

#: under the root dir
LOGS = "logs"
DIR_MODE = 0o700
#: what the shim appends to a log file's name when it rotates (``.log.<n>``)
_SUFFIX_ROOM = len(".log.999")


def log_dir_name(namespace: str, name: str) -> str:
    return disk_name(namespace, name)


def log_dir(root: Path, namespace: str, name: str) -> Path:
    return Path(root) / LOGS / log_dir_name(namespace, name)


def log_file_name(container: str) -> str:
    return disk_name(container, reserve=_SUFFIX_ROOM) + ".log"


def prepare_log_file(root: Path, namespace: str, name: str, container: str) -> Path:
    """Make the pod's log directory and its container's log file (0600) without
    following a link on the way; returns the file's path for the shim, which
    appends to it. A link planted at the directory or the file raises
    ``agent.safepath.UnsafePathError`` and nothing is written."""
    d = log_dir(root, namespace, name)
    fname = log_file_name(container)
    with opened_dir(root, (LOGS, d.name), create=True, mode=DIR_MODE) as dfd:
        fd = open_file(dfd, fname, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600, where=d, root=Path(root))
        os.close(fd)
    return d / fname
