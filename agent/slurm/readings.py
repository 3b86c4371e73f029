"""Per-step readings from the step's own cgroup: run-queue delay, memory, CPU pressure (thin I/O).

- run-queue delay: the threads' ``run_delay`` from ``/proc/<tid>/schedstat``, summed
  into a cumulative counter per step (a thread that exits keeps what it added);
  the threads are the step's ``tasks`` (v1) / ``cgroup.threads`` (v2), below it included;
- memory: ``memory.usage_in_bytes`` (v1 memory controller) or ``memory.current`` (v2);
- CPU pressure: the step's ``cpu.pressure`` "some total" (v2 only: v1 has no per-cgroup PSI);
- CPUs: the step's effective cpuset as task/cgroup confined it (``step_cpus``: v1
  ``cpuset.effective_cpus``, v2 ``cpuset.cpus.effective``), the CPUs the pod directory gives it.
A reading that cannot be taken (the step ended meanwhile) is left out, never zero.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent.cgroups.paths import effective_cpus_file, threads_file
from agent.cpuset import CPUSet
from agent.fsread import read_optional
from agent.pressure.procfs import read_psi

__all__ = ["StepReading", "StepReader", "step_cpus"]


@dataclass(frozen=True)
class StepReading:
    #: cumulative seconds the step's threads waited runnable for a CPU
    runqueue_delay_s: float
    memory_bytes: int | None = None
    #: cumulative seconds some of the step's threads stalled on CPU (v2 PSI), None on v1
    cpu_pressure_some_s: float | None = None
    threads: int = 0


#: how deep below a step its threads may be (v2: step/user/task_N; v1: step/task_N)
_MAX_DEPTH = 3


def _read(path: str) -> bytes | None:
    """A small kernel file's bytes, or None when it is gone (a step or thread that ended)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 65536)
    except OSError:
        return None
    finally:
        os.close(fd)


def step_thread_ids(step_dir: str, v2: bool, depth: int = 0) -> list[int]:
    """The threads in a step's cgroup and below it (Slurm's layout is a few levels deep: no
    unbounded walk, no links followed); the files are read bare, as the kernel writes them."""
    out: list[int] = []
    data = _read(os.path.join(step_dir, threads_file(v2)))
    if data:
        out.extend(int(t) for t in data.split())
    if depth < _MAX_DEPTH:
        try:
            with os.scandir(step_dir) as it:
                subdirs = [e.path for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            subdirs = []
        for d in subdirs:
            out.extend(step_thread_ids(d, v2, depth + 1))
    return out


def run_delay_ns(tid: int, procfs_root: str) -> int | None:
    """Field 2 of ``/proc/<tid>/schedstat``: ns the thread waited runnable; None once it exited."""
    data = _read(f"{procfs_root}/{tid}/schedstat")
    parts = data.split() if data else []
    try:
        return int(parts[1]) if len(parts) >= 2 else None
    except ValueError:
        return None


def _int_file(path: Path) -> int | None:
    text = read_optional(path)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def step_cpus(cpuset_mount: Path | None, path: str, v2: bool) -> CPUSet | None:
    """The CPUs step ``path`` may run on: its cpuset's effective list in the cpuset hierarchy
    (v1) or the unified one (v2); None where it has none (task/cgroup does not confine cores,
    the cpuset controller is not enabled for it, the step ended) or it reads empty."""
    if cpuset_mount is None:
        return None
    text = read_optional(cpuset_mount / path.lstrip("/") / effective_cpus_file(v2))
    if text is None:
        return None
    try:
        cpus = CPUSet.parse(text.strip())
    except ValueError:
        return None
    return cpus or None


class StepReader:
    """Reads the steps it is asked about; keeps per-thread last values for the cumulative delay.
    ``tasks_mount``: where the step's threads are listed (v1 freezer/cpuset, or v2);
    ``memory_mount``: the v1 memory controller or v2; ``v2``: whether those are cgroup v2."""

    def __init__(self, tasks_mount: Path | None, memory_mount: Path | None, v2: bool,
                 procfs_root: str = "/proc") -> None:
        self.tasks_mount = tasks_mount
        self.memory_mount = memory_mount
        self.v2 = v2
        self.procfs_root = procfs_root
        self._last: dict[int, int] = {}
        self._totals: dict[str, int] = {}

    def read(self, paths: Iterable[str]) -> dict[str, StepReading]:
        out: dict[str, StepReading] = {}
        seen: dict[int, int] = {}
        totals: dict[str, int] = {}
        for path in paths:
            tids = (step_thread_ids(os.path.join(str(self.tasks_mount), path.lstrip("/")), self.v2)
                    if self.tasks_mount is not None else [])
            grown = 0
            for tid in tids:
                delay = run_delay_ns(tid, self.procfs_root)
                if delay is None:
                    continue
                prev = self._last.get(tid)
                grown += delay - prev if prev is not None and delay >= prev else 0 if prev is not None else delay
                seen[tid] = delay
            totals[path] = self._totals.get(path, 0) + grown
            mem = None
            if self.memory_mount is not None:
                name = "memory.current" if self.v2 else "memory.usage_in_bytes"
                mem = _int_file(self.memory_mount / path.lstrip("/") / name)
            psi = None
            if self.v2 and self.tasks_mount is not None:
                p = read_psi(self.tasks_mount / path.lstrip("/") / "cpu.pressure")
                psi = p.some_total_us / 1e6 if p is not None else None
            out[path] = StepReading(totals[path] / 1e9, mem, psi, len(tids))
        self._last = seen
        self._totals = totals  # steps that ended are forgotten: their series end with them
        return out
