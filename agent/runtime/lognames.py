"""The names of a pod's container logs, ``<root>/logs/<namespace>_<name>/<container>.log``, as strings.

``agent.runtime.logdir`` makes and hands over those files (through ``agent.safepath``, with
pathlib); this is the part a reader needs to find them, with nothing but ``agent.diskname``
behind it: ``hwagent launch --wait`` computes its job's log path on every launch, and
``logdir``'s imports (pathlib, safepath, typing) were most of what its log tail cost a
launch (bench/cli.py, tests/unit/test_cli_imports.py). ``logdir`` re-exports these names,
so the runtime that writes a log and the commands that read it compute one place.
"""

from __future__ import annotations

import os

from agent.diskname import disk_name

#: typing is not imported at run time (the CLI's start-up); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent.rootpaths import StrPath

__all__ = ["LOGS", "log_dir_name", "log_file_name", "log_path"]

#: under the root dir
LOGS = "logs"
#: what the shim appends to a log file's name when it rotates (``.log.<n>``)
_SUFFIX_ROOM = len(".log.999")


def log_dir_name(namespace: str, name: str) -> str:
    return disk_name(namespace, name)


def log_file_name(container: str) -> str:
    return disk_name(container, reserve=_SUFFIX_ROOM) + ".log"


def log_path(root: StrPath, namespace: str, name: str, container: str) -> str:
    """The log file of ``container`` of pod ``namespace/name`` under the root dir ``root``."""
    return os.path.join(root, LOGS, log_dir_name(namespace, name), log_file_name(container))
