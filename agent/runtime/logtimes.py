"""When each part of a container's log arrived: the shim's times file beside the log.

The log itself stays the container's bytes, unchanged (``cat``, ``launch --wait``
and every reader see exactly what the workload wrote). The shim also appends
one record to ``<container>.times`` for each chunk it copies from the workload's
pipe: the chunk's offset in the log file and the time it was read (unix ns).
The times file rotates with the log (``.log.N`` and ``.times.N``).

A line's time is the time of the chunk holding its first byte: when the shim
received it, as a logging driver stamps a line (several lines written in one
burst share a time). A line with no record before it (written by a shim that
kept no times) has no time, and says so rather than borrowing one.

Pure functions over bytes; ``hwagent logs`` does the reading.
"""

from __future__ import annotations

import bisect
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["RECORD", "TIMES_SUFFIX", "Line", "times_name", "parse_records", "split_lines", "select",
           "rfc3339", "parse_since", "stamped", "times_path"]

#: (offset in the log file, unix time in ns), native byte order as the C shim writes it
RECORD = struct.Struct("=QQ")
TIMES_SUFFIX = ".times"
_NO_TIME = "-"


@dataclass(frozen=True)
class Line:
    text: bytes
    #: unix ns when the shim received the line's first byte; None when no record says
    ns: int | None


def times_name(log_name: str) -> str:
    """``main.log`` -> ``main.times``, ``main.log.2`` -> ``main.times.2``."""
    stem, dot, rest = log_name.rpartition(".log")
    if not dot:
        return log_name + TIMES_SUFFIX
    return f"{stem}{TIMES_SUFFIX}{rest}"


def parse_records(raw: bytes) -> list[tuple[int, int]]:
    """The records in a times file; a torn last record (a shim killed mid-write) is ignored."""
    n = len(raw) // RECORD.size
    return [RECORD.unpack_from(raw, i * RECORD.size) for i in range(n)]


def split_lines(log: bytes, records: Sequence[tuple[int, int]], base: int = 0) -> list[Line]:
    """``log`` (bytes starting at file offset ``base``) as lines, each with its time."""
    offsets = [off for off, _ in records]
    out: list[Line] = []
    start = 0
    while start < len(log):
        end = log.find(b"\n", start)
        end = len(log) if end < 0 else end + 1
        i = bisect.bisect_right(offsets, base + start) - 1
        out.append(Line(log[start:end], records[i][1] if i >= 0 else None))
        start = end
    return out


def select(lines: Iterable[Line], tail: int | None = None, since_ns: int | None = None) -> list[Line]:
    """Lines received at or after ``since_ns`` (a line without a time is left out), then the last ``tail``."""
    kept = [ln for ln in lines if since_ns is None or (ln.ns is not None and ln.ns >= since_ns)]
    if tail is not None:
        kept = kept[len(kept) - tail:] if tail > 0 else []
    return kept


def rfc3339(ns: int) -> str:
    """RFC 3339 in UTC with nanoseconds (what ``docker logs -t`` and the kubelet print)."""
    secs, frac = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def stamped(line: Line) -> bytes:
    """The line with its time in front, ``-`` where it has none."""
    return (rfc3339(line.ns) if line.ns is not None else _NO_TIME).encode() + b" " + line.text


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_since(text: str, now_ns: int) -> int:
    """``--since``: a duration back from now (``90s``, ``5m``, ``1h30m``, ``2d``) or an
    RFC 3339 time (``2026-01-02T15:04:05Z``); the unix ns it names. ValueError says what fits."""
    if text and _DURATION.sub("", text) == "":
        secs = sum(float(n) * _UNIT_S[u] for n, u in _DURATION.findall(text))
        return now_ns - int(secs * 1_000_000_000)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since {text!r}: give a duration (90s, 5m, 1h30m, 2d) or an RFC 3339 time "
                         "(2026-01-02T15:04:05Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1_000_000_000)


def times_path(log: Path) -> Path:
    return log.with_name(times_name(log.name))
