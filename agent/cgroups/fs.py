"""cpuset, cpu.idle, CPU quota and memory.high reads and writes, v1 (through cgroupspy) or v2.

Ordering matters on v1: a child's cpuset.cpus must stay inside its parent's,
so a plan is applied in two passes — widen top-down (ancestors first, to the
union of old and new), then narrow bottom-up (children first, to the exact new
value). A child the plan does not name is clamped to the intersection before
its parent narrows. v2 accepts any order; the same passes are harmless there.

A cgroup that disappears mid-write (its container exited) is expected: it is
logged, counted in ``hwagent_cgroups_vanished_total``, and skipped.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from dataclasses import dataclass, field
from pathlib import Path

from cgroupspy.nodes import Node
from prometheus_client import Counter

from agent.cgroups.detect import CgroupLayout
from agent.cgroups.paths import effective_cpus_file, safe_rel
from agent.cpuset import CPUSet
from agent.eventlog import get_logger

__all__ = ["CgroupFS", "ApplyReport", "CgroupVanished", "VANISHED", "WRITE_ERRORS"]

log = get_logger("hwagent.cgroups")

VANISHED = Counter(
    "hwagent_cgroups_vanished_total", "cgroups that disappeared while hwagent read or wrote them", ["controller"]
)
WRITE_ERRORS = Counter(
    "hwagent_cgroups_write_errors_total", "cgroup writes the kernel refused (other than a vanished cgroup)",
    ["controller"],
)  # fmt: skip

_GONE = (errno.ENOENT, errno.ENODEV, errno.ESRCH)


class CgroupVanished(Exception):
    """The cgroup directory no longer exists."""


@dataclass
class ApplyReport:
    written: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)


class CgroupFS:
    def __init__(self, layout: CgroupLayout) -> None:
        self.layout = layout
        self.cpuset_v2 = layout.is_v2("cpuset")
        self.cpuset_root = layout.controller_root("cpuset")
        self.cpu_root = layout.controller_root("cpu")
        self.cpu_v2 = layout.is_v2("cpu")
        #: v1: usage is cpuacct's (co-mounted with cpu on most distributions); v2: cpu.stat
        self.cpuacct_root = self.cpu_root if self.cpu_v2 else layout.controller_root("cpuacct")
        #: memory.high and memory.current are v2 files (v1 has no memory.high)
        self.memory_root = layout.controller_root("memory")
        self.memory_v2 = layout.is_v2("memory")

    # -- low level --------------------------------------------------------------
    def _dir(self, root: Path, rel: str) -> Path:
        return root / safe_rel(rel).lstrip("/")

    def _node(self, rel: str) -> Node:
        """A cgroupspy node chain for a v1 cpuset cgroup (no tree walk)."""
        node = Node(str(self.cpuset_root.parent).encode())
        node = Node(self.cpuset_root.name.encode(), parent=node)
        for part in safe_rel(rel).strip("/").split("/"):
            if part:
                node = Node(part.encode(), parent=node)
        return node

    def _vanished(self, controller: str, rel: str, what: str) -> CgroupVanished:
        VANISHED.labels(controller).inc()
        log.info("cgroup vanished", controller=controller, path=rel, during=what)
        return CgroupVanished(rel)

    @contextmanager
    def _writing(self, controller: str, rel: str, what: str) -> Iterator[None]:
        """Around a cgroup file write: a cgroup gone meanwhile is ``CgroupVanished``; any other
        failure is counted (``WRITE_ERRORS``) and raised as it was."""
        try:
            yield
        except OSError as e:
            if e.errno in _GONE:
                raise self._vanished(controller, rel, what) from None
            WRITE_ERRORS.labels(controller).inc()
            raise

    def exists(self, rel: str) -> bool:
        return self._dir(self.cpuset_root, rel).is_dir()

    def cpu_cgroup_exists(self, rel: str) -> bool:
        """Whether ``rel`` exists in the hierarchy that holds cpu.idle."""
        return self._dir(self.cpu_root, rel).is_dir()

    def read_cpus(self, rel: str) -> CPUSet:
        """The configured cpuset.cpus ("" on v2 means "inherit" and reads as empty)."""
        try:
            if self.cpuset_v2:
                return CPUSet.parse((self._dir(self.cpuset_root, rel) / "cpuset.cpus").read_text())
            return CPUSet(self._node(rel).controller.cpus)
        except OSError as e:
            if e.errno in _GONE:
                raise self._vanished("cpuset", rel, "read") from None
            raise

    def read_effective_cpus(self, rel: str) -> CPUSet:
        return self._read_cpuset_file(rel, effective_cpus_file(self.cpuset_v2))

    def read_mems(self, rel: str) -> CPUSet:
        return self._read_cpuset_file(rel, "cpuset.mems")

    def _read_cpuset_file(self, rel: str, name: str) -> CPUSet:
        try:
            return CPUSet.parse((self._dir(self.cpuset_root, rel) / name).read_text())
        except OSError as e:
            if e.errno in _GONE:
                raise self._vanished("cpuset", rel, "read") from None
            raise

    def _write(self, rel: str, key: str, value: CPUSet) -> None:
        with self._writing("cpuset", rel, f"write {key}"):
            if self.cpuset_v2:
                (self._dir(self.cpuset_root, rel) / f"cpuset.{key}").write_text(str(value))
            else:
                ctrl = self._node(rel).controller
                setattr(ctrl, key, set(value))  # cgroupspy formats the list

    def write_mems(self, rel: str, mems: CPUSet) -> None:
        self._write(rel, "mems", mems)

    # -- plans ------------------------------------------------------------------
    def _children(self, rel: str) -> list[str]:
        base = self._dir(self.cpuset_root, rel)
        try:
            return sorted(f"{safe_rel(rel).rstrip('/')}/{p.name}" for p in base.iterdir() if p.is_dir())
        except OSError:
            return []

    def _ancestors(self, rel: str) -> list[str]:
        parts = safe_rel(rel).strip("/").split("/")
        return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]

    def _read(self, key: str, rel: str) -> CPUSet:
        return self.read_cpus(rel) if key == "cpus" else self.read_mems(rel)

    def apply_cpusets(self, plan: dict[str, CPUSet], mems: CPUSet | None = None) -> ApplyReport:
        """Make each cgroup's cpuset.cpus exactly its planned value, in safe order.
        A v1 cgroup with empty cpuset.mems gets ``mems`` (default: its parent's)."""
        return self._apply("cpus", plan, mems)

    def apply_mems(self, plan: dict[str, CPUSet]) -> ApplyReport:
        """The same for cpuset.mems (NUMA-bound containers' memory nodes)."""
        return self._apply("mems", plan, None)

    def _apply(self, key: str, plan: dict[str, CPUSet], mems: CPUSet | None) -> ApplyReport:
        report = ApplyReport()
        plan = {safe_rel(k): v for k, v in plan.items()}
        alive: dict[str, CPUSet] = {}
        for rel in sorted(plan, key=lambda r: r.count("/")):
            try:
                alive[rel] = self._read(key, rel)
            except CgroupVanished:
                report.vanished.append(rel)
        # pass 1 (v1 only: v2 has no containment rule on writes): widen, ancestors first
        if not self.cpuset_v2:
            for rel in sorted(alive, key=lambda r: r.count("/")):
                if not self._guarded(report, rel, partial(self._widen, key, rel, plan, mems)):
                    alive.pop(rel, None)
        # pass 2: narrow, deepest first, clamping unplanned children first
        for rel in sorted(alive, key=lambda r: -r.count("/")):
            if self._guarded(report, rel, partial(self._narrow, key, rel, plan)):
                report.written.append(rel)
        for rel, msg in report.errors:
            log.warning("cpuset write failed", key=key, path=rel, error=msg)
        return report

    @staticmethod
    def _guarded(report: ApplyReport, rel: str, step: Callable[[], None]) -> bool:
        """Run one cgroup's step; a vanished cgroup or a refused write goes into the
        report (and the plan goes on with the others). True when the step succeeded."""
        try:
            step()
            return True
        except CgroupVanished:
            report.vanished.append(rel)
        except OSError as e:
            report.errors.append((rel, f"{e.strerror or e}"))
        return False

    def _widen(self, key: str, rel: str, plan: dict[str, CPUSet], mems: CPUSet | None) -> None:
        """v1: make room for ``plan[rel]`` in every unplanned ancestor and in ``rel`` itself
        (the union of old and new), giving a cgroup without memory nodes some first."""
        new = plan[rel]
        ancestors = self._ancestors(rel)
        for anc in ancestors:
            if anc in plan:
                continue
            cur = self._read(key, anc)
            if not new <= cur:
                self._write(anc, key, cur | new)
        cur = self._read(key, rel)
        if key == "cpus" and not self.read_mems(rel):
            parent = ancestors[-1] if ancestors else "/"
            self.write_mems(rel, mems if mems is not None else self.read_mems(parent))
        if not new <= cur:
            self._write(rel, key, cur | new)

    def _narrow(self, key: str, rel: str, plan: dict[str, CPUSet]) -> None:
        """Set ``rel`` to exactly its planned value, after clamping unplanned children (v1)."""
        new = plan[rel]
        if not self.cpuset_v2:
            self._clamp_children(key, rel, new, plan)
        if self._read(key, rel) != new:
            self._write(rel, key, new)

    def _clamp_children(self, key: str, rel: str, new: CPUSet, plan: dict[str, CPUSet]) -> None:
        for child in self._children(rel):
            if child in plan:
                continue
            self._clamp_children(key, child, new, plan)
            try:
                cur = self._read(key, child)
            except CgroupVanished:
                continue
            if cur and not cur <= new:
                clamped = (cur & new) or new
                try:
                    self._write(child, key, clamped)
                except CgroupVanished:
                    continue

    # -- cpu.idle -----------------------------------------------------------------
    def cpu_idle_path(self, rel: str) -> Path:
        return self._dir(self.cpu_root, rel) / "cpu.idle"

    def read_cpu_idle(self, rel: str) -> int | None:
        """cpu.idle of a cgroup; None when the kernel has no cpu.idle."""
        p = self.cpu_idle_path(rel)
        try:
            return int(p.read_text().strip())
        except FileNotFoundError:
            if not self._dir(self.cpu_root, rel).is_dir():
                raise self._vanished("cpu", rel, "read cpu.idle") from None
            return None

    def write_cpu_idle(self, rel: str, value: int) -> bool:
        """Write cpu.idle if it differs; True when written."""
        if value not in (0, 1):
            raise ValueError(f"cpu.idle must be 0 or 1, got {value}")
        cur = self.read_cpu_idle(rel)
        if cur is None:
            raise FileNotFoundError(errno.ENOENT, "kernel has no cpu.idle", str(self.cpu_idle_path(rel)))
        if cur == value:
            return False
        with self._writing("cpu", rel, "write cpu.idle"):
            self.cpu_idle_path(rel).write_text(str(value))
        return True

    # -- cpu.shares (v1's weight: the reclaimed class where there is no cpu.idle) ----
    def read_cpu_shares(self, rel: str) -> int:
        """v1 ``cpu.shares`` of a cgroup of the cpu hierarchy."""
        try:
            return int((self._dir(self.cpu_root, rel) / "cpu.shares").read_text())
        except FileNotFoundError:
            raise self._vanished("cpu", rel, "read cpu.shares") from None

    def write_cpu_shares(self, rel: str, value: int) -> bool:
        """Write v1 ``cpu.shares`` if it differs; True when written."""
        if self.read_cpu_shares(rel) == value:
            return False
        with self._writing("cpu", rel, "write cpu.shares"):
            (self._dir(self.cpu_root, rel) / "cpu.shares").write_text(str(value))
        return True

    # -- CPU quota and usage (the advisor's suppression) ------------------------------
    def read_cpu_quota(self, rel: str) -> tuple[int | None, int]:
        """(quota µs per period or None when unlimited, period µs): ``cpu.max`` on v2,
        ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` on v1."""
        d = self._dir(self.cpu_root, rel)
        try:
            if self.cpu_v2:
                quota, _, period = (d / "cpu.max").read_text().strip().partition(" ")
                return (None if quota == "max" else int(quota)), int(period or 100000)
            q = int((d / "cpu.cfs_quota_us").read_text())
            return (None if q < 0 else q), int((d / "cpu.cfs_period_us").read_text())
        except FileNotFoundError:
            raise self._vanished("cpu", rel, "read the cpu quota") from None

    def write_cpu_quota(self, rel: str, quota_us: int | None, period_us: int | None = None) -> bool:
        """Set the CPU quota (None: unlimited; ``period_us`` None keeps the period); True when
        something changed. At least 1 ms per period: the kernel's own minimum."""
        if quota_us is not None and quota_us < 1000:
            raise ValueError(f"cpu quota must be at least 1000us, got {quota_us}")
        cur_q, cur_p = self.read_cpu_quota(rel)
        period = cur_p if period_us is None else period_us
        if (cur_q, cur_p) == (quota_us, period):
            return False
        d = self._dir(self.cpu_root, rel)
        with self._writing("cpu", rel, "write the cpu quota"):
            if self.cpu_v2:
                (d / "cpu.max").write_text(f"{'max' if quota_us is None else quota_us} {period}")
            else:
                if period != cur_p:
                    if cur_q is not None:  # lift the quota first: the old one may not fit the new period
                        (d / "cpu.cfs_quota_us").write_text("-1")
                    (d / "cpu.cfs_period_us").write_text(str(period))
                (d / "cpu.cfs_quota_us").write_text("-1" if quota_us is None else str(quota_us))
        return True

    def read_cpu_usage_ns(self, rel: str) -> int:
        """CPU time the cgroup's tasks used since it was made (ns): ``cpuacct.usage`` on v1,
        ``usage_usec`` of ``cpu.stat`` on v2."""
        d = self._dir(self.cpuacct_root, rel)
        try:
            if self.cpu_v2:
                for line in (d / "cpu.stat").read_text().splitlines():
                    k, _, v = line.partition(" ")
                    if k == "usage_usec":
                        return int(v) * 1000
                return 0
            return int((d / "cpuacct.usage").read_text())
        except FileNotFoundError:
            raise self._vanished("cpuacct", rel, "read cpu usage") from None

    # -- memory.high (the advisor's memory squeeze of reclaimed pods; cgroup v2 only) ------------
    def _memory_file(self, rel: str, name: str, what: str) -> str:
        try:
            return (self._dir(self.memory_root, rel) / name).read_text().strip()
        except FileNotFoundError:
            raise self._vanished("memory", rel, what) from None

    def read_memory_high(self, rel: str) -> int | None:
        """``memory.high`` in bytes; None when unlimited (``max``)."""
        v = self._memory_file(rel, "memory.high", "read memory.high")
        return None if v == "max" else int(v)

    def read_memory_current(self, rel: str) -> int:
        """``memory.current``: the bytes the cgroup's tasks use now (page cache included)."""
        return int(self._memory_file(rel, "memory.current", "read memory.current"))

    def write_memory_high(self, rel: str, value: int | None) -> bool:
        """Set ``memory.high`` (None: ``max``, unlimited); True when it changed. Past it the kernel
        reclaims and throttles the cgroup, it does not OOM-kill it."""
        if value is not None and value < 0:
            raise ValueError(f"memory.high must be >= 0, got {value}")
        if self.read_memory_high(rel) == value:
            return False
        with self._writing("memory", rel, "write memory.high"):
            (self._dir(self.memory_root, rel) / "memory.high").write_text("max" if value is None else str(value))
        return True
