"""Where the kubelet's container runtimes put pod and container cgroups.

Two kubelet cgroup drivers:
- cgroupfs: ``/kubepods[/burstable|/besteffort]/pod<uid>/<container>``
- systemd:  ``/kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid_>.slice/<scope>``
  (dashes in the uid become underscores, as systemd unit names need)

Container directory names by runtime: containerd ``<id>`` (cgroupfs) or
``cri-containerd-<id>.scope`` (systemd); CRI-O ``crio-<id>`` /
``crio-<id>.scope``; docker ``<id>`` / ``docker-<id>.scope``. Paths here are
relative to a controller root and start with "/".
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "pod_cgroup_candidates",
    "container_cgroup_candidates",
    "find_pod_cgroup",
    "find_container_cgroup",
    "container_dirs",
    "container_id_of",
    "reclaim_root_candidates",
    "self_cgroups",
    "safe_rel",
]

QOS_CLASSES = ("", "burstable", "besteffort")
_SCOPE = re.compile(r"^(?:cri-containerd|crio|docker|cri-o)-([0-9a-f]{12,64})\.scope$")
_CGROUPFS_CRIO = re.compile(r"^crio-([0-9a-f]{12,64})$")
_BARE_ID = re.compile(r"^[0-9a-f]{64}$")


def _systemd_uid(uid: str) -> str:
    return uid.replace("-", "_")


def pod_cgroup_candidates(uid: str) -> list[str]:
    out = []
    for qos in QOS_CLASSES:
        out.append(f"/kubepods/{qos + '/' if qos else ''}pod{uid}")
    u = _systemd_uid(uid)
    for qos in QOS_CLASSES:
        if qos:
            out.append(f"/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{u}.slice")
        else:
            out.append(f"/kubepods.slice/kubepods-pod{u}.slice")
    return out


def container_cgroup_candidates(uid: str, container_id: str) -> list[str]:
    names = (container_id, f"crio-{container_id}", f"cri-containerd-{container_id}.scope",
             f"crio-{container_id}.scope", f"docker-{container_id}.scope")  # fmt: skip
    return [f"{pod}/{n}" for pod in pod_cgroup_candidates(uid) for n in names]


def find_pod_cgroup(controller_root: Path, uid: str) -> str | None:
    for rel in pod_cgroup_candidates(uid):
        if (controller_root / rel.lstrip("/")).is_dir():
            return rel
    return None


def find_container_cgroup(controller_root: Path, uid: str, container_id: str) -> str | None:
    pod = find_pod_cgroup(controller_root, uid)
    if pod is None:
        return None
    for rel in container_cgroup_candidates(uid, container_id):
        if rel.startswith(pod + "/") and (controller_root / rel.lstrip("/")).is_dir():
            return rel
    return None


def container_id_of(dirname: str) -> str | None:
    """The container id a runtime encoded in a cgroup directory name."""
    m = _SCOPE.match(dirname) or _CGROUPFS_CRIO.match(dirname)
    if m:
        return m.group(1)
    if _BARE_ID.match(dirname):
        return dirname
    return None


def container_dirs(controller_root: Path, pod_rel: str) -> dict[str, str]:
    """container id -> cgroup path for every container cgroup under a pod
    (the sandbox/pause container included: cgroups do not say which it is)."""
    base = controller_root / pod_rel.lstrip("/")
    out: dict[str, str] = {}
    try:
        names = sorted(p.name for p in base.iterdir() if p.is_dir())
    except OSError:
        return out
    for name in names:
        cid = container_id_of(name)
        if cid:
            out[cid] = f"{pod_rel}/{name}"
    return out


def reclaim_root_candidates() -> list[str]:
    """The besteffort QoS cgroup, where reclaimed_cores pods live."""
    return ["/kubepods/besteffort", "/kubepods.slice/kubepods-besteffort.slice"]


def self_cgroups(procfs_root: str | Path = "/proc", pid: str = "self") -> dict[str, str]:
    """controller -> cgroup path of a process (v2 under key "")."""
    out: dict[str, str] = {}
    text = (Path(procfs_root) / pid / "cgroup").read_text()
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        if ctrls == "":
            out[""] = path
        for c in ctrls.split(","):
            if c:
                out[c] = path
    return out


def safe_rel(rel: str) -> str:
    """Normalise a cgroup path; refuses anything that could leave the root."""
    if not rel.startswith("/"):
        raise ValueError(f"cgroup path must start with '/': {rel!r}")
    parts = [p for p in rel.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"cgroup path must not contain '.' or '..': {rel!r}")
    return "/" + "/".join(parts)
