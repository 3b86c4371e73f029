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

import functools
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from agent.cgroups.detect import DEFAULT_CGROUP_ROOT

__all__ = [
    "CPU_IDLE_FILE",
    "effective_cpus_file",
    "threads_file",
    "PodCgroups",
    "pod_uids_named",
    "mount_suffixes",
    "pod_cgroup_candidates",
    "container_cgroup_candidates",
    "find_pod_cgroup",
    "find_container_cgroup",
    "container_dirs",
    "container_id_of",
    "reclaim_root_candidates",
    "self_cgroups",
    "safe_rel",
    "nested_subtrees",
    "validate_rel_path",
    "CgroupPathError",
    "DEFAULT_WORKLOAD_ROOTS",
]

#: the subtrees hwagent may act on (kill, enforce) when nothing else is configured: its own
#: workload runtime's slice and the kubelet's pod cgroups under both cgroup drivers
DEFAULT_WORKLOAD_ROOTS: tuple[str, ...] = ("/hwagent.slice", "/kubepods", "/kubepods.slice")

#: Linux's PATH_MAX and NAME_MAX: no cgroup path can be longer
_PATH_MAX = 4096
_NAME_MAX = 255
#: control characters; one C-level search, not a Python loop over every character: this gate
#: runs ~60 times per pod launched and the loop was ~2 % of a launch's daemon CPU (bench/cli.py)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

QOS_CLASSES = ("", "burstable", "besteffort")
_SCOPE = re.compile(r"^(?:cri-containerd|crio|docker|cri-o)-([0-9a-f]{12,64})\.scope$")
_CGROUPFS_CRIO = re.compile(r"^crio-([0-9a-f]{12,64})$")
_BARE_ID = re.compile(r"^[0-9a-f]{64}$")


def _systemd_uid(uid: str) -> str:
    return uid.replace("-", "_")


def _one_name(what: str, name: str) -> str:
    """A pod UID or container id from outside becomes one path component, never more."""
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise CgroupPathError(f"{what} {name!r} cannot name a cgroup")
    return name


def pod_cgroup_candidates(uid: str) -> list[str]:
    _one_name("pod uid", uid)
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
    _one_name("container id", container_id)
    names = (container_id, f"crio-{container_id}", f"cri-containerd-{container_id}.scope",
             f"crio-{container_id}.scope", f"docker-{container_id}.scope")  # fmt: skip
    return [f"{pod}/{n}" for pod in pod_cgroup_candidates(uid) for n in names]


def find_pod_cgroup(controller_root: Path, uid: str) -> str | None:
    # the CPU enforcer asks this for every pod it holds CPUs of and has no cgroup for (a
    # standalone pod between its admission and its start: none of these names): string
    # joins and stats, no Path per candidate
    root = str(controller_root)
    for rel in pod_cgroup_candidates(uid):
        if os.path.isdir(os.path.join(root, _valid_workload_rel(rel).lstrip("/"))):
            return rel
    return None


#: the parents of the kubelet's pod cgroups in each layout (``pod_cgroup_candidates``' directories)
_POD_PARENTS = tuple(dict.fromkeys(rel.rpartition("/")[0] for rel in pod_cgroup_candidates("x")))


def pod_uids_named(names: Iterable[str]) -> set[str]:
    """The pod uids directory names in those parents may stand for (the inverse of
    ``pod_cgroup_candidates``: "pod<uid>", "kubepods[-<qos>]-pod<uid, - as _>.slice"); a name
    that is no pod's gives nothing, a systemd one both spellings of its uid."""
    out: set[str] = set()
    for name in names:
        if name.startswith("pod"):
            out.add(name[3:])
        elif name.startswith("kubepods-") and name.endswith(".slice") and "-pod" in name:
            u = name[:-len(".slice")].rpartition("-pod")[2]
            out.update((u, u.replace("_", "-")))
    return out


#: cgroup v2's idle scheduling file (1: the cgroup's tasks run as SCHED_IDLE), the key a runtime
#: is handed in NRI's ``unified`` map for a reclaimed container
CPU_IDLE_FILE = "cpu.idle"


def threads_file(v2: bool) -> str:
    """The file listing a cgroup's own threads: v1 ``tasks``, v2 ``cgroup.threads`` (a v2
    directory has no ``tasks``)."""
    return "cgroup.threads" if v2 else "tasks"


def effective_cpus_file(v2: bool) -> str:
    """The file with the CPUs a cgroup's tasks may really use: v1 ``cpuset.effective_cpus``,
    v2 ``cpuset.cpus.effective``."""
    return "cpuset.cpus.effective" if v2 else "cpuset.effective_cpus"


class PodCgroups:
    """``find_pod_cgroup`` for many pods at once (one enforcer pass): each kubepods parent
    directory is listed once, and a pod is a set lookup instead of up to six stats (45 ms
    of CPU for 1,000 pods without cgroups, an NRI node's, at every pass). The same
    candidates in the same order; the one found is validated as there (a name no listed
    directory has is not validated: it names nothing). A listing is as of the pass."""

    def __init__(self, controller_root: Path) -> None:
        self.root = str(controller_root)
        self._listed: dict[str, frozenset[str]] = {}

    def _names(self, parent: str) -> frozenset[str]:
        names = self._listed.get(parent)
        if names is None:
            try:
                with os.scandir(os.path.join(self.root, parent.lstrip("/"))) as it:
                    names = frozenset(e.name for e in it if e.is_dir())
            except OSError:
                names = frozenset()
            self._listed[parent] = names
        return names

    def listing(self) -> dict[str, frozenset[str]]:
        """Every layout's parent and the directories in it now (what ``find`` looks in)."""
        return {parent: self._names(parent) for parent in _POD_PARENTS}

    def find(self, uid: str) -> str | None:
        for rel in pod_cgroup_candidates(uid):  # a uid that names more than one component is refused here
            parent, _, name = rel.rpartition("/")
            if name in self._names(parent):
                return _valid_workload_rel(rel) and rel  # what is found is checked as there
        return None


def find_container_cgroup(controller_root: Path, uid: str, container_id: str) -> str | None:
    pod = find_pod_cgroup(controller_root, uid)
    if pod is None:
        return None
    for rel in container_cgroup_candidates(uid, container_id):
        if rel.startswith(pod + "/") and (controller_root / validate_rel_path(rel).lstrip("/")).is_dir():
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


def mount_suffixes(path: str, mount_root: str = DEFAULT_CGROUP_ROOT) -> list[str]:
    """The paths an absolute cgroupfs path may mean relative to a controller root.

    Without the mount table, "/sys/fs/cgroup/cpu/a/b" may be v1's "/a/b" under the
    cpu controller or v2's "/cpu/a/b": every "/"-rooted suffix, longest first, is a
    candidate, for a caller that checks each against what it owns. Empty for a path
    not under ``mount_root``.
    """
    if not path.startswith(mount_root):
        return []
    parts = path.split("/")
    rels = ("/" + "/".join(p for p in parts[i:] if p) for i in range(len(parts)))
    return [rel for rel in rels if rel != "/"]


class CgroupPathError(ValueError):
    """A cgroup path from outside that hwagent will not act on (the message says why)."""


def validate_rel_path(
    path: object,
    under: Sequence[str] | None = DEFAULT_WORKLOAD_ROOTS,
    *,
    mounts: Iterable[str | Path] = (),
) -> str:
    """The one gate for cgroup paths that come from outside hwagent.

    gRPC requests, checkpoints, pod-resources answers and launchers name cgroups as
    strings; before hwagent writes, enforces or kills anything by such a name it comes
    through here. Returns the path normalised to "/a/b", relative to a controller root.
    Refused (CgroupPathError): anything not a string, a relative path, "." or ".."
    components (the kernel would resolve "/kubepods/.." to the root), NUL and control
    characters, names longer than the kernel allows, and with ``under`` (the default:
    hwagent's and the kubelet's workload subtrees) anything that is not strictly below
    one of those roots, the roots themselves included. A path under one of ``mounts``
    ("/sys/fs/cgroup/cpu/kubepods/x") is taken relative to that mount first.
    """
    if not isinstance(path, str):
        raise CgroupPathError(f"cgroup path must be a string, got {type(path).__name__}")
    if len(path.encode("utf-8", "surrogateescape")) > _PATH_MAX:
        raise CgroupPathError(f"cgroup path longer than {_PATH_MAX} bytes")
    if _CONTROL.search(path):
        raise CgroupPathError(f"cgroup path must not hold control characters: {path!r}")
    if not path.startswith("/"):
        raise CgroupPathError(f"cgroup path must start with '/': {path!r}")
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise CgroupPathError(f"cgroup path must not contain '.' or '..': {path!r}")
    if any(len(p.encode("utf-8", "surrogateescape")) > _NAME_MAX for p in parts):
        raise CgroupPathError(f"cgroup path has a component longer than {_NAME_MAX} bytes: {path[:80]!r}...")
    rel = "/" + "/".join(parts)
    for mnt in sorted((str(m).rstrip("/") for m in mounts), key=len, reverse=True):
        if mnt and (rel == mnt or rel.startswith(mnt + "/")):
            rel = rel[len(mnt):] or "/"
            break
    if under is not None:
        roots = _DEFAULT_ROOTS if under is DEFAULT_WORKLOAD_ROOTS else [validate_rel_path(r, None) for r in under]
        if not any(r != "/" and rel.startswith(r + "/") or r == "/" and rel != "/" for r in roots):
            raise CgroupPathError(
                f"cgroup path {rel!r} is outside the workload subtrees ({', '.join(roots) or 'none configured'})"
            )
    return rel


#: the default roots, normalised once (each check normalised all three again)
_DEFAULT_ROOTS = [validate_rel_path(r, None) for r in DEFAULT_WORKLOAD_ROOTS]


@functools.lru_cache(maxsize=4096)
def _valid_workload_rel(rel: str) -> str:
    """``validate_rel_path`` under the default roots, remembered: a pure function of the string,
    asked for the same six candidates of a pod at each enforcer pass (a refusal raises every time)."""
    return validate_rel_path(rel)


def safe_rel(rel: str) -> str:
    """Normalise a cgroup path; refuses anything that could leave the root (no subtree rule).

    The same few paths (a container's, its pod's) pass here ~60 times per pod launched, once per
    hierarchy and operation: a valid one is remembered (a pure function of the string; a refusal
    is not cached and raises every time)."""
    if type(rel) is str:
        return _safe_rel_cached(rel)
    return validate_rel_path(rel, None)


@functools.lru_cache(maxsize=4096)
def _safe_rel_cached(rel: str) -> str:
    return validate_rel_path(rel, None)


def nested_subtrees(a: str, b: str) -> bool:
    """Whether one cgroup subtree is the other or lies inside it (``/a`` and ``/a/b``; not ``/a`` and ``/ab``)."""
    a, b = "/" + a.strip("/") + "/", "/" + b.strip("/") + "/"
    return a.startswith(b) or b.startswith(a)
