"""What a workload container's cgroup holds, computed from its assignment (pure).

CPU weight and quota follow the kubelet's helpers (pkg/kubelet/cm/helpers_linux.go):
shares = milliCPU * 1024 / 1000 clamped to [2, 262144] (2 when no request);
CFS quota = milliCPU * period / 1000 with a floor of 1 ms, period 100 ms; and
the v1 -> v2 conversion of shares to ``cpu.weight`` that runc and the kubelet
use: 1 + (shares - 2) * 9999 / 262142.

Device rules come in two policies (see docs/runtime.md): ``managed`` denies
only the device nodes hwagent manages that this container was not granted
(every other host device stays reachable, as for any bare-metal process and
as Slurm's ConstrainDevices does); ``strict`` denies everything, then allows
the defaults (null, zero, full, random, urandom, tty, pts, ptmx) and the
granted nodes, as container runtimes do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from agent.cpuset import CPUSet

__all__ = [
    "MIN_SHARES",
    "MAX_SHARES",
    "QUOTA_PERIOD_US",
    "MIN_QUOTA_US",
    "DEFAULT_DEVICES",
    "DeviceRule",
    "CgroupLimits",
    "milli_cpu_to_shares",
    "milli_cpu_to_quota",
    "shares_to_weight",
    "device_rules",
    "hugetlb_name",
]

MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
QUOTA_PERIOD_US = 100_000
MIN_QUOTA_US = 1_000

DevicePolicy = Literal["managed", "strict"]


def milli_cpu_to_shares(milli: int | None) -> int:
    if not milli:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, milli * SHARES_PER_CPU // 1000))


def milli_cpu_to_quota(milli: int | None, period_us: int = QUOTA_PERIOD_US) -> int | None:
    """CFS quota in µs for a CPU limit; None = unlimited (no limit set)."""
    if not milli:
        return None
    return max(MIN_QUOTA_US, milli * period_us // 1000)


def shares_to_weight(shares: int) -> int:
    if shares <= 0:
        return 0
    return 1 + ((shares - 2) * 9999) // 262142


@dataclass(frozen=True)
class DeviceRule:
    """One v1 devices.allow/deny line: ``c 1:3 rwm``; ``a`` = every device."""

    kind: Literal["a", "c", "b"]
    major: int | None = None  # None = any
    minor: int | None = None
    access: str = "rwm"

    def line(self) -> str:
        if self.kind == "a":
            return "a"
        mj = "*" if self.major is None else str(self.major)
        mn = "*" if self.minor is None else str(self.minor)
        return f"{self.kind} {mj}:{mn} {self.access}"


#: (kind, major, minor) of the nodes every container gets: null, zero, full, random,
#: urandom, tty, ptmx, and every /dev/pts/N (major 136)
DEFAULT_DEVICES: tuple[DeviceRule, ...] = (
    DeviceRule("c", 1, 3), DeviceRule("c", 1, 5), DeviceRule("c", 1, 7), DeviceRule("c", 1, 8),
    DeviceRule("c", 1, 9), DeviceRule("c", 5, 0), DeviceRule("c", 5, 2), DeviceRule("c", 136, None),
)  # fmt: skip


@dataclass(frozen=True)
class CgroupLimits:
    cpus: CPUSet
    mems: CPUSet
    cpu_shares: int = MIN_SHARES
    #: None = no CFS quota
    cpu_quota_us: int | None = None
    cpu_period_us: int = QUOTA_PERIOD_US
    cpu_idle: bool = False
    #: None = no limit
    memory_limit: int | None = None
    pids_max: int | None = None
    #: strict: deny "a" first, then allow ``device_allow``; managed: deny ``device_deny``
    device_policy: DevicePolicy = "managed"
    device_allow: tuple[DeviceRule, ...] = ()
    device_deny: tuple[DeviceRule, ...] = ()
    #: hugetlb limits: (kernel page-size name as in ``hugetlb.<name>.max``, e.g. "2MB", bytes);
    #: page sizes not named are left as the parent has them
    hugetlb: tuple[tuple[str, int], ...] = ()
    #: controllers the settings need (a missing one is a per-pod error)
    needs: frozenset[str] = field(default_factory=frozenset)

    @property
    def cpu_weight(self) -> int:
        return shares_to_weight(self.cpu_shares)

    @property
    def cpu_max(self) -> str:
        """v2 ``cpu.max``."""
        quota = "max" if self.cpu_quota_us is None else str(self.cpu_quota_us)
        return f"{quota} {self.cpu_period_us}"


def _key(kind: str, major: int, minor: int) -> tuple[str, int, int]:
    return (kind, major, minor)


def device_rules(
    policy: DevicePolicy,
    granted: Iterable[tuple[str, int, int, str]],
    managed: Iterable[tuple[str, int, int]],
) -> tuple[tuple[DeviceRule, ...], tuple[DeviceRule, ...]]:
    """(allow, deny) rules. ``granted``: (kind, major, minor, permissions) of the
    nodes this container was given; ``managed``: (kind, major, minor) of every
    node hwagent's device plugins hand out."""
    granted = list(granted)
    got = {_key(k, mj, mn) for k, mj, mn, _ in granted}
    if policy == "strict":
        allow = list(DEFAULT_DEVICES)
        for k, mj, mn, perm in granted:
            access = "".join(c for c in "rwm" if c in (perm or "rw")) or "rw"
            allow.append(DeviceRule(k, mj, mn, access if "m" in access else access + "m"))  # type: ignore[arg-type]
        return tuple(dict.fromkeys(allow)), (DeviceRule("a"),)
    deny = sorted({_key(k, mj, mn) for k, mj, mn in managed} - got)
    return (), tuple(DeviceRule(k, mj, mn) for k, mj, mn in deny)  # type: ignore[arg-type]


def hugetlb_name(page_size: int) -> str:
    """The kernel's name of a page size in hugetlb cgroup files: 2 MiB -> "2MB", 1 GiB -> "1GB", 64 KiB -> "64KB"."""
    for shift, suffix in ((30, "GB"), (20, "MB"), (10, "KB")):
        if page_size % (1 << shift) == 0:
            return f"{page_size >> shift}{suffix}"
    return f"{page_size}B"
