"""The kubelet's container log layout, read for the names it encodes.

``<log_dir>/pods/<namespace>_<pod>_<uid>/`` per pod and
``<log_dir>/containers/<pod>_<namespace>_<container>-<container id>.log`` per
container (symlinks the kubelet keeps for log shippers). Namespace and pod
names are DNS labels/subdomains, so they never contain "_"; a container id is
64 hex digits. Names that do not parse are skipped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from agent.kubelet.resolve import LogNames

__all__ = ["read_log_names"]

_CONTAINER_LOG = re.compile(r"^([^_]+)_([^_]+)_(.+)-([0-9a-f]{64})\.log$")


def _names(d: Path) -> list[str]:
    try:
        return os.listdir(d)
    except OSError:
        return []


def read_log_names(log_dir: str | Path = "/var/log") -> LogNames:
    base = Path(log_dir)
    pods: dict[str, tuple[str, str]] = {}
    for name in _names(base / "pods"):
        parts = name.split("_")
        if len(parts) == 3 and all(parts):
            ns, pod, uid = parts
            pods[uid] = (ns, pod)
    containers: dict[str, tuple[str, str, str]] = {}
    for name in _names(base / "containers"):
        m = _CONTAINER_LOG.match(name)
        if m:
            pod, ns, container, cid = m.groups()
            containers[cid] = (ns, pod, container)
    return LogNames(pods, containers)
