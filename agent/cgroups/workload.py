"""Workload container cgroups: create, configure, signal, kill, remove.

One cgroup per container at ``<subtree>/<pod>/<container>`` in every
controller the runtime uses: on v1 and hybrid the same relative path under
each v1 controller (cpuset, cpu, cpuacct, memory, devices, pids; co-mounted
controllers are one directory), plus, where a v2 hierarchy is mounted (the
hybrid ``unified/`` mount, or the whole tree on v2), the same path there. On
hybrid the v2 directory holds no controllers but gives what v1 lacks: an
atomic ``cgroup.kill`` for the whole subtree and the place a
BPF_PROG_TYPE_CGROUP_DEVICE program attaches.

Reclaimed pods may live in a second subtree of their own (``reclaimed_subtree``,
a sibling of the first), whose ``cpu.idle`` is 1: idleness counts among siblings,
so only a top-level idle parent makes the hogs' CPU time idle at the root, where
the runtime subtree competes with the rest of the machine (issue 26).

Every path is checked to lie strictly below one of the configured subtrees, so
nothing here can signal or remove a cgroup hwagent does not own.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from agent.cgroups.detect import CgroupError, CgroupLayout
from agent.cgroups.devbpf import DeviceProgramError, DevicePrograms
from agent.cgroups.limits import CgroupLimits
from agent.cgroups.paths import nested_subtrees, safe_rel
from agent.cpuset import CPUSet
from agent.eventlog import get_logger

__all__ = ["WORKLOAD_CONTROLLERS", "CgroupSetupError", "WorkloadCgroups", "controller_files", "Hierarchy"]

log = get_logger("hwagent.cgroups")

WORKLOAD_CONTROLLERS = ("cpuset", "cpu", "cpuacct", "memory", "devices", "pids", "hugetlb")
#: the v2 controllers a container's limits are written through (devices are BPF on v2)
V2_CONTROLLERS = ("cpuset", "cpu", "memory", "pids", "hugetlb")
#: on hybrid, controllers the v2 tree may hold when no v1 hierarchy mounts them (hugetlb: some
#: distributions leave it unmounted in v1 and available in unified/)
HYBRID_V2_CONTROLLERS = ("hugetlb",)
_GONE = (errno.ENOENT, errno.ENODEV, errno.ESRCH)


class CgroupSetupError(Exception):
    """A container cgroup could not be created or configured (the message says which file and why)."""


@dataclass(frozen=True)
class Hierarchy:
    """One mounted directory tree the runtime creates container cgroups in."""

    root: Path
    #: v1 controllers in this directory ("" for the v2 tree)
    controllers: tuple[str, ...]
    v2: bool = False


def controller_files(limits: CgroupLimits, controller: str, v2: bool) -> list[tuple[str, str]]:
    """(file, value) writes for one controller, in the order the kernel needs
    (cpuset.mems before cpuset.cpus: a v1 cpuset without mems takes no task)."""
    out: list[tuple[str, str]] = []
    if controller == "cpuset":
        out += [("cpuset.mems", str(limits.mems)), ("cpuset.cpus", str(limits.cpus))]
    elif controller == "cpu":
        if v2:
            out += [("cpu.weight", str(limits.cpu_weight)), ("cpu.max", limits.cpu_max)]
        else:
            out += [("cpu.shares", str(limits.cpu_shares)), ("cpu.cfs_period_us", str(limits.cpu_period_us)),
                    ("cpu.cfs_quota_us", "-1" if limits.cpu_quota_us is None else str(limits.cpu_quota_us))]
        if limits.cpu_idle:
            out.append(("cpu.idle", "1"))
    elif controller == "memory":
        if v2:
            out.append(("memory.max", "max" if limits.memory_limit is None else str(limits.memory_limit)))
        else:
            out.append(("memory.limit_in_bytes", "-1" if limits.memory_limit is None else str(limits.memory_limit)))
    elif controller == "pids":
        out.append(("pids.max", "max" if limits.pids_max is None else str(limits.pids_max)))
    elif controller == "hugetlb":
        out += [(f"hugetlb.{size}.{'max' if v2 else 'limit_in_bytes'}", str(n)) for size, n in limits.hugetlb]
    elif controller == "devices" and not v2:
        if limits.device_policy == "strict":
            out.append(("devices.deny", "a"))
        out += [("devices.deny", r.line()) for r in limits.device_deny if r.kind != "a"]
        out += [("devices.allow", r.line()) for r in limits.device_allow]
    return out


class WorkloadCgroups:
    def __init__(self, layout: CgroupLayout, subtree: str = "/hwagent.slice",
                 device_programs: DevicePrograms | None = None, *, reclaimed_subtree: str = "") -> None:
        """``device_programs``: enforce device rules with a BPF program on the v2
        directory (required on v2, where no devices controller exists; optional on
        hybrid, where v1's devices controller does the same). ``reclaimed_subtree``:
        where reclaimed pods go, made idle; "" = in ``subtree`` with the others."""
        self.layout = layout
        self.device_programs = device_programs
        self.subtree = safe_rel(subtree)
        if self.subtree == "/":
            raise CgroupError("the workload subtree cannot be the cgroup root")
        self.reclaimed = safe_rel(reclaimed_subtree) if reclaimed_subtree else ""
        if self.reclaimed and (self.reclaimed == "/" or nested_subtrees(self.reclaimed, self.subtree)):
            raise CgroupError(f"the reclaimed pods' subtree {self.reclaimed} must be neither the cgroup root "
                              f"nor inside or around the workload subtree {self.subtree}")
        #: every subtree this runtime's cgroups live in
        self.subtrees = (self.subtree, self.reclaimed) if self.reclaimed else (self.subtree,)
        self.hierarchies = self._hierarchies()
        #: levels of the subtree (never removed here) this process made or checked, per
        #: hierarchy: not stat-ed and read back again for every container (issue 23)
        self._levels_ok: set[str] = set()

    def _hierarchies(self) -> list[Hierarchy]:
        out: list[Hierarchy] = []
        seen: dict[str, int] = {}
        lay = self.layout
        if lay.mode in ("v1", "hybrid"):
            for c in WORKLOAD_CONTROLLERS:
                d = lay.root / c
                if not d.is_dir():
                    continue
                real = os.path.realpath(d)
                if real in seen:  # co-mounted (cpu,cpuacct): one directory
                    h = out[seen[real]]
                    out[seen[real]] = Hierarchy(h.root, h.controllers + (c,))
                    continue
                seen[real] = len(out)
                out.append(Hierarchy(d, (c,)))
        v2root = lay.root if lay.mode == "v2" else lay.root / "unified"
        if lay.mode == "v2" or (v2root / "cgroup.procs").is_file():
            out.append(Hierarchy(v2root, (), v2=True))
        return out

    @property
    def v2(self) -> Hierarchy | None:
        return next((h for h in self.hierarchies if h.v2), None)

    def available(self) -> frozenset[str]:
        """Controllers limits can be written through."""
        have = {c for h in self.hierarchies for c in h.controllers}
        if self.layout.mode == "v2":
            have |= set(self.layout.v2_controllers) & set(V2_CONTROLLERS)
        have |= set(self._hybrid_v2())
        if self.device_programs is not None and self.v2 is not None:
            have.add("devices")
        return frozenset(have)

    # -- paths ------------------------------------------------------------------------
    def check(self, rel: str) -> str:
        """``rel`` normalised; refuses anything not strictly below one of the subtrees."""
        rel = safe_rel(rel)
        if not rel.startswith(self.subtree + "/") and not (self.reclaimed and rel.startswith(self.reclaimed + "/")):
            raise CgroupError(f"cgroup {rel} is outside the workload subtree {' and '.join(self.subtrees)}")
        return rel

    def owns(self, rel: str) -> bool:
        try:
            self.check(rel)
        except (CgroupError, ValueError):
            return False
        return True

    def path(self, pod: str, container: str | None = None, reclaimed: bool = False) -> str:
        """The pod's (or its container's) cgroup; a reclaimed pod's is in the reclaimed subtree, if any."""
        base = self.reclaimed if reclaimed and self.reclaimed else self.subtree
        rel = f"{base}/{pod}" + (f"/{container}" if container else "")
        return self.check(rel)

    def pod_paths(self, pod: str) -> list[str]:
        """The pod's cgroup in each subtree: where to look for a pod whose class is not known
        (an orphan's, at restore) or was made by a runtime configured otherwise."""
        return [self.check(f"{base}/{pod}") for base in self.subtrees]

    def find_pod(self, pod: str, reclaimed: bool) -> str:
        """``path(pod, reclaimed=...)``, unless only the other subtree holds the pod: a restored
        pod made before the reclaimed subtree was configured (or unset) is found where it is."""
        want = self.path(pod, reclaimed=reclaimed)
        if len(self.subtrees) == 1 or self.exists(want):
            return want
        other = next(p for p in self.pod_paths(pod) if p != want)
        return other if self.exists(other) else want

    def _dir(self, h: Hierarchy, rel: str) -> Path:
        return h.root / self.check(rel).lstrip("/")

    def _sdir(self, h: Hierarchy, rel: str) -> str:
        """``_dir`` as a string: the runtime's per-pod calls (exists, pids, remove) stat and walk
        ~7 hierarchies each, and a Path per directory was a good part of their cost (issue 23)."""
        return _join(str(h.root), self.check(rel))

    def exists(self, rel: str) -> bool:
        return any(os.path.isdir(self._sdir(h, rel)) for h in self.hierarchies)

    def dirs(self, rel: str) -> list[str]:
        """The cgroup's directories that exist now, one per hierarchy."""
        return [d for h in self.hierarchies if os.path.isdir(d := self._sdir(h, rel))]

    def procs_files(self, rel: str) -> list[str]:
        return [self._sdir(h, rel) + "/cgroup.procs" for h in self.hierarchies]

    # -- create / configure -------------------------------------------------------------
    def _ensure_parents(self, h: Hierarchy, rel: str, needs: frozenset[str] = frozenset()) -> None:
        """Intermediate directories; on v1 cpuset they get their parent's CPUs and
        memory nodes (a v1 cpuset starts empty and takes no children's CPUs). One
        found empty gets them too: a daemon killed between the mkdir and these
        writes left it so, and no container under it could ever be given CPUs."""
        parts = rel.strip("/").split("/")[:-1]
        cur = str(h.root)
        v2 = h.v2 and self._v2_wanted(needs)
        idle = _join(cur, self.reclaimed) if self.reclaimed and rel.startswith(self.reclaimed + "/") else ""
        subtree = idle or _join(cur, self.subtree)
        for p in parts:
            nxt = _join(cur, "/" + p)
            if not v2 and nxt in self._levels_ok:
                cur = nxt
                continue
            made = not os.path.isdir(nxt)
            if made:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(nxt)
            if "cpuset" in h.controllers:
                _inherit_cpuset(cur, nxt, only_empty=not made)
            if v2:
                self._enable_v2(Path(cur), needs)
            if nxt == idle:
                self._idle_subtree(h, nxt)
            if len(nxt) <= len(subtree):  # the subtree or above it: stays while this process runs
                self._levels_ok.add(nxt)
            cur = nxt
        if v2:
            self._enable_v2(Path(cur), needs)

    def _idle_subtree(self, h: Hierarchy, d: str) -> None:
        """``cpu.idle`` 1 on the reclaimed subtree (where this hierarchy has the cpu controller):
        written when the runtime makes it, or first uses one left from before."""
        if "cpu" not in self._controllers_of(h):
            return
        f = d + "/cpu.idle"
        if not os.path.exists(f):
            raise CgroupSetupError("this kernel has no cpu.idle (needed for a reclaimed pod)")
        if not _same(_read(f), "1"):
            try:
                with open(f, "w") as out:
                    out.write("1")
            except OSError as e:
                raise CgroupSetupError(f"cannot write '1' to {f}: {e.strerror or e}") from None

    def _hybrid_v2(self) -> tuple[str, ...]:
        """On hybrid, the controllers written through the v2 tree (none mounted in v1)."""
        if self.layout.mode != "hybrid":
            return ()
        return tuple(c for c in HYBRID_V2_CONTROLLERS if self.layout.is_v2(c))

    def _v2_wanted(self, needs: frozenset[str] = frozenset()) -> frozenset[str]:
        """v2 controllers to enable down to a container: all of ours on v2; on hybrid only
        what the container's limits need there (the unified tree is systemd's otherwise)."""
        if self.layout.mode == "v2":
            return frozenset(self.layout.v2_controllers) & frozenset(V2_CONTROLLERS)
        return frozenset(self._hybrid_v2()) & needs

    def _enable_v2(self, d: Path, needs: frozenset[str] = frozenset()) -> None:
        want = set(self._v2_wanted(needs))
        try:
            have = set((d / "cgroup.subtree_control").read_text().split())
        except FileNotFoundError:  # only in fixture trees: the kernel creates it with the directory
            have = set()
        missing = want - have
        if missing:
            (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(missing)))

    def create(self, rel: str, limits: CgroupLimits, cpuset: bool = True) -> list[str]:
        """Create the container's cgroup everywhere and write its limits; returns
        the cgroup.procs files the process must join. On any failure nothing is
        left behind and CgroupSetupError says what failed.

        ``cpuset=False``: the CPU policy writes the cpuset files (it is their one
        writer); the cgroup starts with its parent's CPUs and memory nodes, which a v1
        cpuset needs before anything can join it (v2 inherits them by itself)."""
        rel = self.check(rel)
        missing = sorted(limits.needs - self.available())
        if missing:
            hint = ""
            if "devices" in missing and self.v2 is not None:
                hint = "; on cgroup v2 device access is a BPF program: [runtime] devices_bpf, and bcc"
            raise CgroupSetupError(f"cgroup controller {', '.join(missing)} is not available on this node "
                                   f"({self.layout.mode} hierarchy at {self.layout.root}{hint})")
        try:
            self._create(rel, limits, cpuset, retry=bool(self._levels_ok))
        except FileNotFoundError:
            # a level remembered as checked was removed by someone else: look again, once
            self._levels_ok.clear()
            self._create(rel, limits, cpuset, retry=False)
        return self.procs_files(rel)

    def _create(self, rel: str, limits: CgroupLimits, cpuset: bool, retry: bool) -> None:
        """``create``'s work; on a failure nothing is left and CgroupSetupError says what,
        except, with ``retry``, a missing file or directory on the way (FileNotFoundError),
        which ``create`` tries once more without the levels it remembered."""
        try:
            for h in self.hierarchies:
                self._ensure_parents(h, rel, limits.needs)
                d = self._sdir(h, rel)
                try:
                    os.mkdir(d)
                except FileExistsError:
                    if not os.path.isdir(d):
                        raise
                if not cpuset and "cpuset" in h.controllers:
                    _inherit_cpuset(os.path.dirname(d), d, only_empty=False)
                self._write_limits(h, d, limits, only_drift=False, skip=() if cpuset else ("cpuset",))
                if limits.cpu_idle:
                    self._idle_pod(h, rel)
                if h.v2 and self.device_programs is not None:
                    try:
                        self.device_programs.attach(Path(d), limits)
                    except DeviceProgramError as e:
                        raise CgroupSetupError(str(e)) from None
        except (OSError, CgroupSetupError) as e:
            self.remove(rel)
            if isinstance(e, CgroupSetupError):
                raise
            if isinstance(e, FileNotFoundError) and retry:
                raise
            raise CgroupSetupError(f"cgroup setup of {rel} failed: {e.filename or ''}: {e.strerror or e}") from None

    def _idle_pod(self, h: Hierarchy, rel: str) -> None:
        """``cpu.idle`` on the container's parent, the pod's cgroup, too. Idleness counts
        among siblings, and a container is its pod's only child: written on the container
        alone it made nothing idle, and a reclaimed pod's cgroup competed with a shared
        pod's at full weight (issue 26). The runtime subtree is never marked (the reclaimed
        subtree is, by ``_idle_subtree``)."""
        parent = os.path.dirname(rel.rstrip("/"))
        if parent in ("", "/", *self.subtrees) or "cpu" not in self._controllers_of(h):
            return
        f = self._dir(h, parent) / "cpu.idle"
        if f.exists() and not _same(_read(f), "1"):
            try:
                f.write_text("1")
            except OSError as e:
                raise CgroupSetupError(f"cannot write '1' to {f}: {e.strerror or e}") from None

    def _controllers_of(self, h: Hierarchy) -> tuple[str, ...]:
        if not h.v2:
            return h.controllers
        if self.layout.mode == "v2":
            return tuple(c for c in V2_CONTROLLERS if c in self.layout.v2_controllers)
        return self._hybrid_v2()

    def _write_limits(self, h: Hierarchy, d: str, limits: CgroupLimits, only_drift: bool,
                      skip: tuple[str, ...] = ()) -> list[str]:
        changed: list[str] = []
        for c in self._controllers_of(h):
            if c in skip:
                continue
            for name, value in controller_files(limits, c, h.v2):
                f = d + "/" + name
                if name == "cpu.idle" and not os.path.exists(f):
                    raise CgroupSetupError("this kernel has no cpu.idle (needed for a reclaimed pod)")
                if only_drift:
                    if name.startswith("devices."):
                        pass  # v1 shows no exceptions under allow-all: rewrite (idempotent)
                    elif _same(_read(f), value):
                        continue
                try:
                    with open(f, "w") as out:
                        out.write(value)
                except OSError as e:
                    raise CgroupSetupError(f"cannot write {value!r} to {f}: {e.strerror or e}") from None
                if not name.startswith("devices."):
                    changed.append(f"{os.path.basename(d)}/{name}")
        return changed

    def write_cpuset(self, rel: str, cpus: CPUSet, mems: CPUSet) -> None:
        """The container's CPUs and memory nodes, written where no CPU policy enforcer
        writes them (``enforce_cgroups = false``): the launcher's one write."""
        rel = self.check(rel)
        limits = CgroupLimits(cpus=cpus, mems=mems)
        for h in self.hierarchies:
            d = self._dir(h, rel)
            if d.is_dir() and "cpuset" in self._controllers_of(h):
                for name, value in controller_files(limits, "cpuset", h.v2):
                    try:
                        (d / name).write_text(value)
                    except OSError as e:
                        raise CgroupSetupError(f"cannot write {value!r} to {d / name}: {e.strerror or e}") from None

    def reapply(self, rel: str, limits: CgroupLimits, devices: bool = False) -> list[str]:
        """Re-write limits that drifted (cpuset files excluded: the CPU policy keeps
        those current for bound cgroups). Returns the files rewritten. ``devices``: the
        device rules may have changed since the cgroup was made: on v2 the device program
        for ``limits`` is attached again, replacing the one there (v1's devices lines are
        written on every reapply)."""
        rel = self.check(rel)
        changed: list[str] = []
        for h in self.hierarchies:
            d = self._sdir(h, rel)
            if os.path.isdir(d):
                changed += self._write_limits(h, d, limits, only_drift=True, skip=("cpuset",))
                if devices and h.v2 and self.device_programs is not None:
                    try:
                        self.device_programs.attach(Path(d), limits)
                    except DeviceProgramError as e:
                        raise CgroupSetupError(str(e)) from None
        return changed

    # -- processes ----------------------------------------------------------------------
    def pids(self, rel: str) -> set[int]:
        """Every process in the cgroup and below, in any hierarchy."""
        rel = self.check(rel)
        out: set[int] = set()
        for h in self.hierarchies:
            for dirpath, _dirs, _files in os.walk(self._sdir(h, rel)):
                try:
                    with open(dirpath + "/cgroup.procs", "rb") as f:
                        out.update(int(x) for x in f.read().split())
                except (OSError, ValueError):
                    pass
        return out

    def signal(self, rel: str, sig: int) -> tuple[int, ...]:
        """``sig`` to every process in the cgroup and below (never this one); the pids that got it."""
        sent = []
        for pid in sorted(self.pids(rel)):
            if pid == os.getpid():
                continue
            try:
                os.kill(pid, sig)
                sent.append(pid)
            except ProcessLookupError:
                pass
        return tuple(sent)

    def kill(self, rel: str, timeout_s: float = 5.0) -> bool:
        """SIGKILL everything in the subtree: ``cgroup.kill`` where a v2 directory
        exists (atomic against forks), then every pid on v1 until none is left.
        True when the cgroup is empty."""
        rel = self.check(rel)
        v2 = self.v2
        if v2 is not None:
            kf = self._dir(v2, rel) / "cgroup.kill"
            try:
                kf.write_text("1")
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s
        pause = 0.0005
        while True:
            if not self.signal(rel, signal.SIGKILL) and not self.pids(rel):
                return True
            if time.monotonic() > deadline:
                log.error("workload kill incomplete", cgroup=rel, remaining=len(self.pids(rel)))
                return False
            time.sleep(pause)
            pause = min(0.02, pause * 2)

    def remove(self, rel: str, timeout_s: float = 2.0) -> list[str]:
        """rmdir the cgroup and its children in every hierarchy (deepest first);
        returns the directories that could not be removed."""
        rel = self.check(rel)
        left: list[str] = []
        for h in self.hierarchies:
            base = self._sdir(h, rel)
            try:  # the usual case, an empty cgroup without children: one rmdir, no walk
                os.rmdir(base)
                continue
            except FileNotFoundError:
                continue
            except OSError:
                pass  # children, or tasks still exiting: deepest first, waiting for EBUSY below
            if not os.path.isdir(base):
                continue
            dirs = sorted((p for p, _d, _f in os.walk(base)), key=lambda p: -p.count("/"))
            for d in dirs:
                deadline = time.monotonic() + timeout_s
                pause = 0.0005
                while True:
                    try:
                        os.rmdir(d)
                        break
                    except FileNotFoundError:
                        break
                    except OSError as e:
                        # EBUSY: tasks still exiting (zombies not yet reaped)
                        if e.errno != errno.EBUSY or time.monotonic() > deadline:
                            left.append(str(d))
                            break
                        time.sleep(pause)
                        pause = min(0.02, pause * 2)
        return left

    def remove_pod_dir(self, pod: str) -> None:
        """The pod's directory, in every subtree, once its containers' are gone (ignored while any remains)."""
        for rel in self.pod_paths(pod):
            self.remove_dir(rel)

    def remove_dir(self, rel: str) -> None:
        """One cgroup without children (a pod's, once its containers' are gone) in every
        hierarchy; ignored where it is gone or not empty."""
        rel = self.check(rel)
        for h in self.hierarchies:
            try:
                os.rmdir(self._sdir(h, rel))
            except OSError:
                pass

    def pod_dirs(self) -> set[str]:
        """Names of the pod directories present under the subtrees, any hierarchy."""
        out: set[str] = set()
        for h in self.hierarchies:
            for subtree in self.subtrees:
                base = h.root / subtree.lstrip("/")
                try:
                    out.update(p.name for p in base.iterdir() if p.is_dir())
                except OSError:
                    pass
        return out

    def container_paths(self, pod: str) -> list[str]:
        """The cgroups of the pod's containers present now, in whichever subtree, any hierarchy."""
        out: set[str] = set()
        for rel in self.pod_paths(pod):
            for h in self.hierarchies:
                try:
                    out.update(f"{rel}/{p.name}" for p in self._dir(h, rel).iterdir() if p.is_dir())
                except OSError:
                    pass
        return sorted(out)

    def root_mems(self) -> str:
        """The memory nodes a workload may use when not NUMA-bound: the root cpuset's."""
        if self.layout.mode == "v2":
            f = self.layout.root / "cpuset.mems.effective"
        else:
            f = self.layout.root / "cpuset" / "cpuset.mems"
        return _read(f) or "0"

    def read(self, rel: str, name: str) -> str | None:
        """A control file of the container, wherever it lives (None if absent)."""
        for h in self.hierarchies:
            f = self._dir(h, rel) / name
            if f.exists():
                return _read(f)
        return None


def _join(root: str, rel: str) -> str:
    """``root`` and a checked ``rel`` ("/a/b") as one path string, as ``root / rel.lstrip("/")``."""
    return root + rel if root != "/" else rel


def _read(f: str | Path) -> str | None:
    try:
        with open(f) as src:
            return src.read().strip()
    except OSError:
        return None


def _same(cur: str | None, want: str) -> bool:
    if cur is None:
        return False
    if cur == want:
        return True
    # the kernel rounds and reformats: "max 100000" vs "max", -1 vs 9223372036854771712
    unlimited = {"-1", "max", "9223372036854771712", "9223372036854775807"}
    if cur in unlimited and want in unlimited:
        return True
    return cur.split() == want.split()


def _inherit_cpuset(parent: str | Path, child: str | Path, only_empty: bool) -> None:
    """A v1 cpuset directory gets its parent's memory nodes and CPUs (mems first: a v1
    cpuset takes no task, and no CPUs of its own, without them)."""
    parent, child = os.fspath(parent), os.fspath(child)
    for f in ("/cpuset.mems", "/cpuset.cpus"):
        if not only_empty or _empty(child + f):
            with open(parent + f, "rb") as src:
                value = src.read().strip() or b"\n"
            with open(child + f, "wb") as dst:
                dst.write(value)


def _empty(f: str) -> bool:
    """A cpuset file with nothing in it (absent only in fixture trees, which counts as empty)."""
    try:
        with open(f, "rb") as src:
            return not src.read().strip()
    except FileNotFoundError:
        return True
