"""Every pod and container cgroup under a kubelet's kubepods tree, in one walk.

``paths.py`` answers "where is the cgroup of pod U / container C"; this answers
the reverse question the pressure signals need ("whose is cgroup P"), for the
whole tree at once, from the directory names alone: the pod UID and QoS class
from the pod directory, the container id from the runtime's directory name.

Both kubelet cgroup drivers are read (see paths.py), under a ``cgroup_root``
(the kubelet's ``--cgroup-root``, "/" by default) so a test can own a
kubepods-like tree anywhere. cpuset.cpus of each container is read too when the
hierarchy has it, since pools are groups of containers sharing CPUs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from agent.cgroups.paths import container_id_of
from agent.cpuset import CPUSet

__all__ = ["KubepodsCgroup", "parse_pod_dir", "walk_kubepods"]

_POD_CGROUPFS = re.compile(r"^pod([0-9a-fA-F-]{8,})$")
_POD_SYSTEMD = re.compile(r"^kubepods(?:-(burstable|besteffort))?-pod([0-9a-fA-F_]{8,})\.slice$")


@dataclass(frozen=True)
class KubepodsCgroup:
    """One container cgroup of a pod, as the directory tree names it."""

    #: path relative to the controller root, "/"-rooted
    path: str
    pod_uid: str
    container_id: str
    #: kubelet QoS class from the tree: "guaranteed", "burstable" or "besteffort"
    qos_class: str
    #: cpuset.cpus when the hierarchy has it, else None
    cpus: CPUSet | None = None


def parse_pod_dir(parent_qos: str, name: str) -> tuple[str, str] | None:
    """(pod uid, qos class) for a pod directory name, or None when it is not one."""
    m = _POD_CGROUPFS.match(name)
    if m:
        return m.group(1), parent_qos
    m = _POD_SYSTEMD.match(name)
    if m:
        return m.group(2).replace("_", "-"), m.group(1) or "guaranteed"
    return None


def _subdirs(d: Path) -> list[str]:
    try:
        with os.scandir(d) as it:
            return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        return []  # removed while walking, or not there


def _read_cpus(d: Path) -> CPUSet | None:
    try:
        return CPUSet.parse((d / "cpuset.cpus").read_text().strip())
    except (OSError, ValueError):
        return None


def walk_kubepods(
    controller_root: str | Path, cgroup_root: str = "/", cpuset_root: str | Path | None = None
) -> list[KubepodsCgroup]:
    """Every container cgroup under ``<cgroup_root>/kubepods[.slice]`` of one hierarchy.

    ``cpuset_root``: where cpuset.cpus is read (the v1 cpuset mount on a v1 or
    hybrid host, the same root on v2); None reads it from ``controller_root``.
    """
    root = Path(controller_root)
    cpus_root = Path(cpuset_root) if cpuset_root is not None else root
    base_rel = "/" + cgroup_root.strip("/") if cgroup_root.strip("/") else ""
    out: list[KubepodsCgroup] = []
    for top in ("kubepods", "kubepods.slice"):
        top_rel = f"{base_rel}/{top}"
        top_dir = root / top_rel.lstrip("/")
        if not top_dir.is_dir():
            continue
        # (relative dir, qos of pods found directly in it)
        levels = [(top_rel, "guaranteed")]
        for name in _subdirs(top_dir):
            if name in ("burstable", "besteffort"):
                levels.append((f"{top_rel}/{name}", name))
            elif name in ("kubepods-burstable.slice", "kubepods-besteffort.slice"):
                levels.append((f"{top_rel}/{name}", name[len("kubepods-"):-len(".slice")]))
        for level_rel, qos in levels:
            for pod_name in _subdirs(root / level_rel.lstrip("/")):
                parsed = parse_pod_dir(qos, pod_name)
                if parsed is None:
                    continue
                uid, pod_qos = parsed
                pod_rel = f"{level_rel}/{pod_name}"
                for cname in _subdirs(root / pod_rel.lstrip("/")):
                    cid = container_id_of(cname)
                    if cid is None:
                        continue
                    rel = f"{pod_rel}/{cname}"
                    out.append(KubepodsCgroup(rel, uid, cid, pod_qos, _read_cpus(cpus_root / rel.lstrip("/"))))
    return out
