"""Typed readings from the probes' maps, or from the file fallbacks when a probe is off.

Each reader answers one question with cumulative counters; windows, rates and
decisions are computed by the pure modules from successive readings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.cgroups.hierarchy import CgroupIndex
from agent.cgroups.tree import cgroup_thread_ids
from agent.contracts.hist import Histogram
from agent.pressure.probes import ProbeSet
from agent.pressure.procfs import read_diskstats, read_net_errors, schedstats

__all__ = [
    "OTHER_CGROUP",
    "UNKNOWN_CGROUP",
    "BLOCK_OPS",
    "rollup",
    "BpfRunqueue",
    "SchedstatRunqueue",
    "BlockReading",
    "BpfBlock",
    "DiskstatsBlock",
    "NetCounters",
    "BpfNet",
    "SysfsNet",
    "Extras",
    "BpfExtras",
    "dev_key",
    "block_name",
]

#: rows the probe could not give their own cgroup (map full)
OTHER_CGROUP = "(other)"
#: delay of tasks whose cgroup could not be read at switch-in (cgroup id 0)
UNKNOWN_CGROUP = "(unknown)"
BLOCK_OPS = ("read", "write", "flush", "discard", "other")


def _int(k: Any) -> int:
    return k if isinstance(k, int) else int(k.value)


def rollup(by_cgroup: dict[str, Histogram], path: str) -> Histogram:
    """Everything measured in ``path`` and below it."""
    path = path.rstrip("/") or "/"
    prefix = path + "/" if path != "/" else "/"
    total = Histogram()
    for p, h in by_cgroup.items():
        if p == path or p.startswith(prefix):
            total = total + h
    return total


class BpfRunqueue:
    """Per-cgroup run-queue delay from the runqlat probe's map."""

    source = "bpf"

    def __init__(self, probes: ProbeSet, index: CgroupIndex) -> None:
        self.probes = probes
        self.index = index

    def read(self, watch: Iterable[str] = ()) -> dict[str, Histogram]:
        tbl = self.probes.table("rq_cgroups")
        overflow = self.probes.constant("runqlat", "RQ_OVERFLOW_CGID")
        out: dict[str, Histogram] = {}
        gone = []
        for k, v in tbl.items():
            cgid = _int(k)
            h = Histogram.from_slots(v.slots, v.sum_ns)
            if cgid == overflow:
                path = OTHER_CGROUP
            elif cgid == 0:
                path = UNKNOWN_CGROUP
            else:
                p = self.index.path(cgid)
                if p is None:
                    gone.append(k)
                    continue
                path = p
            out[path] = out[path] + h if path in out else h
        for k in gone:  # the cgroup was removed: free its row for new ones
            try:
                del tbl[tbl.Key(_int(k))]
            except (KeyError, OSError):
                pass
        return out

    def dropped(self) -> tuple[int, int]:
        """(task slots refused, cgroup rows refused) since load: map-full counters."""
        tbl = self.probes.table("rq_drops")
        vals = [sum(v) for _, v in sorted(tbl.items(), key=lambda kv: _int(kv[0]))]
        return (int(vals[0]), int(vals[1])) if len(vals) >= 2 else (0, 0)


class SchedstatRunqueue:
    """Fallback: run_delay and pcount from /proc/<tid>/schedstat, over watched cgroups.

    Keeps per-thread last values so threads that exit keep their contribution and
    the per-cgroup counters stay cumulative. Each read, a thread's new timeslices
    (pcount growth) land in the log2 slot of its mean wait per timeslice over the
    interval (run_delay growth / pcount growth), so the fallback has counts and a
    p99 as the BPF probe's histogram does: of per-thread means over the interval,
    which hides the spread inside one thread's interval (coarser than the probe's
    one slot per wake-up); the sum is exact.
    """

    source = "schedstat"

    def __init__(self, mount: Path, procfs_root: str = "/proc") -> None:
        self.mount = Path(mount)
        self.procfs_root = procfs_root
        self._last: dict[int, tuple[int, int]] = {}
        self._totals: dict[str, int] = {}
        self._slots: dict[str, list[int]] = {}

    def read(self, watch: Iterable[str] = ()) -> dict[str, Histogram]:
        seen: dict[int, tuple[int, int]] = {}
        for path in watch:
            tids = cgroup_thread_ids(self.mount, path)
            stats = schedstats(tids, self.procfs_root)
            grown = 0
            slots = self._slots.setdefault(path, [])
            for tid, (d, n) in stats.items():
                prev = self._last.get(tid)
                if prev is not None and d >= prev[0]:
                    grown += d - prev[0]
                    dn = n - prev[1]
                    if dn > 0:
                        s = log2_slot((d - prev[0]) // dn // 1000)
                        if s >= len(slots):
                            slots.extend([0] * (s + 1 - len(slots)))
                        slots[s] += dn
                seen[tid] = (d, n)
            self._totals[path] = self._totals.get(path, 0) + grown
        self._last = seen
        return {p: Histogram.from_slots(self._slots.get(p, ()), t) for p, t in self._totals.items()}


def log2_slot(us: int) -> int:
    """The probes' log2 slot of ``us`` (bcc's bpf_log2l: 0 and 1 µs in slot 1, [2^(s-1), 2^s) in s)."""
    return max(1, int(us).bit_length())


def dev_key(dev: int) -> str:
    """Kernel-internal dev_t (as in block tracepoints: major << 20 | minor) -> 'MAJ:MIN'."""
    return f"{dev >> 20}:{dev & 0xFFFFF}"


def block_name(key: str, sysfs_root: str = "/sys") -> str:
    """'7:0' -> 'loop0' via /sys/dev/block; the key itself when unknown."""
    try:
        return Path(sysfs_root, "dev", "block", key).resolve(strict=True).name
    except OSError:
        return key


@dataclass(frozen=True)
class BlockReading:
    #: (MAJ:MIN, op) -> latency histogram
    latency: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    #: (MAJ:MIN, op, errno) -> count (errno positive, e.g. 28 for ENOSPC)
    errors: dict[tuple[str, str, int], int] = field(default_factory=dict)
    source: str = "bpf"

    def errors_by_device(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (dev, _op, _err), n in self.errors.items():
            out[dev] = out.get(dev, 0) + n
        return out


class BpfBlock:
    source = "bpf"

    def __init__(self, probes: ProbeSet) -> None:
        self.probes = probes

    def read(self) -> BlockReading:
        lat = {}
        for k, v in self.probes.table("blk_lat").items():
            lat[(dev_key(k.dev), BLOCK_OPS[min(k.op, 4)])] = Histogram.from_slots(v.slots, v.sum_ns)
        errs: dict[tuple[str, str, int], int] = {}
        for k, v in self.probes.table("blk_errors").items():
            key = (dev_key(k.dev), BLOCK_OPS[min(k.op, 4)], -int(k.error))
            errs[key] = errs.get(key, 0) + _int(v)
        return BlockReading(lat, errs, "bpf")


class DiskstatsBlock:
    """Fallback: /proc/diskstats has averages and no errors, so no histogram and no health."""

    source = "diskstats"

    def __init__(self, procfs_root: str = "/proc") -> None:
        self.procfs_root = procfs_root

    def read(self) -> BlockReading:
        lat = {}
        for key, d in read_diskstats(self.procfs_root).items():
            lat[(key, "read")] = Histogram((), d.read_ms * 1_000_000)
            lat[(key, "write")] = Histogram((), d.write_ms * 1_000_000)
        return BlockReading(lat, {}, "diskstats")


@dataclass(frozen=True)
class NetCounters:
    tx_errors: int = 0
    tx_busy: int = 0
    tx_timeouts: int = 0


class BpfNet:
    source = "bpf"

    def __init__(self, probes: ProbeSet) -> None:
        self.probes = probes

    def read(self) -> dict[str, NetCounters]:
        out = {}
        for k, v in self.probes.table("net_stats").items():
            name = bytes(k.name).split(b"\0", 1)[0].decode(errors="replace")
            out[name] = NetCounters(int(v.tx_errors), int(v.tx_busy), int(v.tx_timeouts))
        return out


class SysfsNet:
    source = "sysfs"

    def __init__(self, sysfs_root: str = "/sys") -> None:
        self.sysfs_root = sysfs_root

    def read(self) -> dict[str, NetCounters]:
        return {n: NetCounters(e.tx_errors, 0, e.tx_timeouts) for n, e in read_net_errors(self.sysfs_root).items()}


@dataclass(frozen=True)
class Extras:
    iommu_faults: dict[str, int] = field(default_factory=dict)
    thermal_trips: dict[tuple[str, int], int] = field(default_factory=dict)
    #: irq -> (handled+unhandled count, unhandled count)
    irqs: dict[int, tuple[int, int]] = field(default_factory=dict)


class BpfExtras:
    def __init__(self, probes: ProbeSet) -> None:
        self.probes = probes

    def read(self) -> Extras:
        iommu: dict[str, int] = {}
        thermal: dict[tuple[str, int], int] = {}
        irqs: dict[int, tuple[int, int]] = {}
        if self.probes.active("iommu"):
            for k, v in self.probes.table("iommu_faults").items():
                iommu[bytes(k.device).split(b"\0", 1)[0].decode(errors="replace")] = _int(v)
        if self.probes.active("thermal"):
            for k, v in self.probes.table("thermal_trips").items():
                zone = bytes(k.zone).split(b"\0", 1)[0].decode(errors="replace")
                thermal[(zone, int(k.trip_type))] = _int(v)
        if self.probes.active("irq"):
            for k, v in self.probes.table("irq_stats").items():
                if v.count:
                    irqs[_int(k)] = (int(v.count), int(v.unhandled))
        return Extras(iommu, thermal, irqs)
