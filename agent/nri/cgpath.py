"""A runtime's cgroup names as cgroupfs paths (pure).

The runtime tells NRI a container's cgroup as the OCI spec's ``linux.cgroupsPath``:
under the cgroupfs driver a path (``/kubepods/burstable/pod<uid>/<id>``), under
the systemd driver ``slice:prefix:name``
(``kubepods-burstable-pod<uid_>.slice:cri-containerd:<id>``), which systemd
places at ``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/cri-containerd-<id>.scope``
(each dash in a slice's name is one level deeper). Every other part of hwagent
(pressure, metrics, the pod directory) keys containers by that cgroupfs path,
relative to a controller root and starting with "/".
"""

from __future__ import annotations

import re

__all__ = ["cgroupfs_path", "slice_path"]

_SYSTEMD = re.compile(r"^((?:[^:/]*\.slice)?):([^:/]*):([^:/]+)$")


def slice_path(unit: str) -> str:
    """Where systemd puts a slice: ``a-b-c.slice`` -> ``/a.slice/a-b.slice/a-b-c.slice``; ``-.slice`` is the root."""
    if not unit.endswith(".slice"):
        raise ValueError(f"not a systemd slice: {unit!r}")
    name = unit[: -len(".slice")]
    if name in ("", "-"):
        return "/"
    parts = name.split("-")
    if "" in parts:
        raise ValueError(f"not a valid slice name (empty part): {unit!r}")
    return "".join("/" + "-".join(parts[: i + 1]) + ".slice" for i in range(len(parts)))


def cgroupfs_path(runtime_path: str) -> str:
    """The cgroupfs path (relative to a controller root, "/"-rooted) of an OCI ``cgroupsPath``;
    "" for an empty one (the runtime did not say). A ``slice:prefix:name`` triple is the systemd
    driver's (runc's rule: the scope is ``prefix-name.scope``, or ``name`` itself when it is a slice)."""
    if not runtime_path:
        return ""
    m = _SYSTEMD.match(runtime_path)
    if m is not None:
        parent, prefix, name = m.groups()
        base = slice_path(parent or "-.slice")
        unit = name if name.endswith(".slice") else (f"{prefix}-{name}.scope" if prefix else f"{name}.scope")
        return base.rstrip("/") + "/" + unit
    path = "/" + runtime_path.strip("/")
    if any(part in (".", "..") for part in path.split("/")):
        raise ValueError(f"cgroup path with . or ..: {runtime_path!r}")
    return path

