"""Plain-file pressure readings: PSI, /proc/<tid>/schedstat, /proc/diskstats, net sysfs.

These are the fallbacks when BPF is not available, and the ground truth the
probes are checked against. Every reader takes its root so fixture trees work.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.fsread import read_int, read_optional, rooted

__all__ = [
    "PSI",
    "read_psi",
    "thread_run_delay_ns",
    "run_delay_ns",
    "DiskStat",
    "read_diskstats",
    "NetErrors",
    "read_net_errors",
]


@dataclass(frozen=True)
class PSI:
    some_avg10: float
    some_total_us: int
    full_avg10: float = 0.0
    full_total_us: int = 0


def read_psi(path: str | Path) -> PSI | None:
    """Parse a PSI file (/proc/pressure/cpu or a v2 cgroup's cpu.pressure); None if absent."""
    text = read_optional(path)
    if text is None:
        return None
    vals: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        vals[kind] = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
    if "some" not in vals:
        return None
    some, full = vals["some"], vals.get("full", {})
    return PSI(
        some_avg10=float(some.get("avg10", 0)) / 100.0,
        some_total_us=int(some.get("total", 0)),
        full_avg10=float(full.get("avg10", 0)) / 100.0,
        full_total_us=int(full.get("total", 0)),
    )


def thread_run_delay_ns(tid: int, procfs_root: str = "/proc") -> int | None:
    """Field 2 of /proc/<tid>/schedstat: ns spent runnable but waiting (CONFIG_SCHED_INFO)."""
    text = read_optional(rooted(procfs_root, str(tid), "schedstat"))
    try:
        return int(text.split()[1]) if text is not None else None
    except (IndexError, ValueError):
        return None


def thread_schedstat(tid: int, procfs_root: str = "/proc") -> tuple[int, int] | None:
    """Fields 2 and 3 of /proc/<tid>/schedstat: (run_delay ns, timeslices run: pcount)."""
    text = read_optional(rooted(procfs_root, str(tid), "schedstat"))
    try:
        f = text.split() if text is not None else []
        return (int(f[1]), int(f[2])) if len(f) >= 3 else None
    except ValueError:
        return None


def schedstats(tids: list[int], procfs_root: str = "/proc") -> dict[int, tuple[int, int]]:
    """(run_delay ns, pcount) per thread, for the threads that still exist."""
    out = {}
    for tid in tids:
        v = thread_schedstat(tid, procfs_root)
        if v is not None:
            out[tid] = v
    return out


def run_delay_ns(tids: list[int], procfs_root: str = "/proc") -> dict[int, int]:
    """run_delay per thread, for the threads that still exist."""
    out = {}
    for tid in tids:
        d = thread_run_delay_ns(tid, procfs_root)
        if d is not None:
            out[tid] = d
    return out


@dataclass(frozen=True)
class DiskStat:
    name: str
    major: int
    minor: int
    reads: int
    read_ms: int
    writes: int
    write_ms: int

    @property
    def key(self) -> str:
        return f"{self.major}:{self.minor}"


def read_diskstats(procfs_root: str = "/proc") -> dict[str, DiskStat]:
    """MAJ:MIN -> counters. No error counts exist in diskstats: device health needs BPF."""
    out: dict[str, DiskStat] = {}
    text = read_optional(rooted(procfs_root, "diskstats"))
    if text is None:
        return out
    for line in text.splitlines():
        f = line.split()
        if len(f) < 11:
            continue
        try:
            d = DiskStat(f[2], int(f[0]), int(f[1]), int(f[3]), int(f[6]), int(f[7]), int(f[10]))
        except ValueError:
            continue
        out[d.key] = d
    return out


@dataclass(frozen=True)
class NetErrors:
    tx_errors: int
    tx_timeouts: int


def read_net_errors(sysfs_root: str = "/sys") -> dict[str, NetErrors]:
    """Interface -> cumulative TX errors and TX watchdog timeouts (sum over tx queues)."""
    out: dict[str, NetErrors] = {}
    base = Path(sysfs_root) / "class" / "net"
    try:
        ifaces = sorted(p.name for p in base.iterdir())
    except OSError:
        return out
    for name in ifaces:
        errs = read_int(base / name / "statistics" / "tx_errors")
        if errs is None:
            continue
        timeouts = sum(read_int(q / "tx_timeout") or 0 for q in (base / name / "queues").glob("tx-*"))
        out[name] = NetErrors(errs, timeouts)
    return out
