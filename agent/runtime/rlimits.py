"""The resource limits a job starts with: its submitter's, read from /proc, as Slurm propagates them.

Why: the daemon runs as root with limits of its own (its descriptor limit raised to the hard
one at start, ``agent.daemon.fdlimit``); a job that inherited them would give a user limits
her administrator did not (limits.conf, pam_limits). Like Slurm's
``PropagateResourceLimits=ALL``, admission reads the limits of the process that submitted
(its pid from SO_PEERCRED) while its connection is open, and the pod's record keeps them,
so every start of its containers, after a restart of the daemon too, gets the same. A pod
with no submitting process (a static manifest, one admitted before this) gets the system's
defaults: PID 1's limits, read at each start.

The pure part parses /proc/<pid>/limits and writes the shim's ``-l`` argument; the reads
are thin adapters. A pid can be reused: ``caller_limits`` reads the process's start time and
effective uid before and after its limits, and refuses unless both match the caller's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from agent.contracts.pods import RLimit

__all__ = ["RESOURCES", "RLimitsUnreadable", "parse_limits", "shim_arg", "parse_shim_arg", "caller_limits",
           "system_limits", "PROC"]

PROC = Path("/proc")

#: /proc/<pid>/limits' label -> prlimit(1)'s name (the shims' table: agent/runtime/shim.c, shim.py)
RESOURCES: dict[str, str] = {
    "Max cpu time": "cpu",
    "Max file size": "fsize",
    "Max data size": "data",
    "Max stack size": "stack",
    "Max core file size": "core",
    "Max resident set": "rss",
    "Max processes": "nproc",
    "Max open files": "nofile",
    "Max locked memory": "memlock",
    "Max address space": "as",
    "Max file locks": "locks",
    "Max pending signals": "sigpending",
    "Max msgqueue size": "msgqueue",
    "Max nice priority": "nice",
    "Max realtime priority": "rtprio",
    "Max realtime timeout": "rttime",
}
_UNLIMITED = "unlimited"


class RLimitsUnreadable(Exception):
    """The limits of a process could not be read, or the pid is no longer the caller's process."""


def _value(word: str) -> int | None:
    if word == _UNLIMITED:
        return None
    v = int(word)
    if v < 0:
        raise ValueError(f"negative limit {word}")
    return v


def parse_limits(text: str) -> tuple[RLimit, ...]:
    """The limits /proc/<pid>/limits lists, in its order; ValueError for a line of a known
    resource that does not hold two values. Resources this kernel lists and we do not know
    are left out (the shims could not name them)."""
    out = []
    for line in text.splitlines()[1:]:
        label = next((k for k in RESOURCES if line.startswith(k + " ")), None)
        if label is None:
            continue
        words = line[len(label):].split()
        if len(words) < 2:
            raise ValueError(f"limits line without soft and hard values: {line!r}")
        out.append(RLimit(RESOURCES[label], _value(words[0]), _value(words[1])))
    return tuple(out)


def _word(v: int | None) -> str:
    return _UNLIMITED if v is None else str(v)


def shim_arg(limits: Iterable[RLimit]) -> str:
    """The shim's ``-l`` argument: ``NAME=SOFT:HARD`` joined by commas, ``unlimited`` for none."""
    return ",".join(f"{r.resource}={_word(r.soft)}:{_word(r.hard)}" for r in limits)


def parse_shim_arg(arg: str) -> tuple[RLimit, ...]:
    """``shim_arg``'s inverse (what the shims accept); ValueError for anything else."""
    out = []
    names = set(RESOURCES.values())
    for item in arg.split(",") if arg else ():
        name, eq, values = item.partition("=")
        soft, colon, hard = values.partition(":")
        if name not in names or not eq or not colon:
            raise ValueError(f"not a limit NAME=SOFT:HARD: {item!r}")
        s, h = _value(soft), _value(hard)
        if h is not None and (s is None or s > h):
            raise ValueError(f"soft limit above the hard one: {item!r}")
        out.append(RLimit(name, s, h))
    return tuple(out)


def _identity(pid: int, proc: Path) -> tuple[str, int]:
    """(start time, effective uid) of ``pid``: what tells this process from a later one with its pid."""
    stat = (proc / str(pid) / "stat").read_text()
    start = stat.rsplit(")", 1)[1].split()[19]
    for line in (proc / str(pid) / "status").read_text().splitlines():
        if line.startswith("Uid:"):
            return start, int(line.split()[2])
    raise ValueError(f"no Uid line in /proc/{pid}/status")


def caller_limits(pid: int, uid: int, proc: Path = PROC) -> tuple[RLimit, ...]:
    """The limits of the caller's process ``pid`` (SO_PEERCRED), which must run as ``uid`` (its
    effective uid) and be the same process before and after the read; RLimitsUnreadable else."""
    if pid <= 0:
        raise RLimitsUnreadable("the kernel named no process for this connection")
    try:
        before = _identity(pid, proc)
        text = (proc / str(pid) / "limits").read_text()
        after = _identity(pid, proc)
        limits = parse_limits(text)
    except (OSError, ValueError, IndexError) as e:
        raise RLimitsUnreadable(f"cannot read the limits of process {pid}: {getattr(e, 'strerror', None) or e}") \
            from None
    if before != after or before[1] != uid:
        raise RLimitsUnreadable(f"process {pid} is no longer the caller's (uid {uid}): it exited")
    if not limits:
        raise RLimitsUnreadable(f"/proc/{pid}/limits lists no limit")
    return limits


def system_limits(proc: Path = PROC) -> tuple[RLimit, ...]:
    """The system's defaults: PID 1's limits (what a service or a login starts from before its own
    settings); RLimitsUnreadable when /proc/1/limits cannot be read."""
    try:
        limits = parse_limits((proc / "1" / "limits").read_text())
    except (OSError, ValueError) as e:
        raise RLimitsUnreadable(f"cannot read /proc/1/limits: {getattr(e, 'strerror', None) or e}") from None
    if not limits:
        raise RLimitsUnreadable("/proc/1/limits lists no limit")
    return limits
