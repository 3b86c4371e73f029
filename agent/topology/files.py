"""Small-file reading for the topology readers: tolerant, and noting what went wrong.

sysfs and procfs are read (through agent.fsread) by this one adapter so that every reader
degrades the same way: a missing file is ``None`` (old kernels simply lack many
of them), an unreadable or malformed one is ``None`` *plus* a warning, and
nothing raises. The warnings end up in ``Topology.warnings`` and in the log.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable

from agent.cpuset import CPUSet, CPUSetError
from agent.fsread import read_text

__all__ = ["Notes", "listdir_ids", "parse_mask", "parse_size"]



def _log_warnings(lines: list[str]) -> None:
    """Log each warning; :mod:`logging` is loaded only when there is one to log.

    ``hwagent topology`` on a machine that reads cleanly should not pay for
    importing it (tests/unit/test_topology_imports.py).
    """
    if not lines:
        return
    from agent.eventlog import get_logger

    log = get_logger("hwagent.topology")
    for line in lines:
        log.warning("topology warning", warning=line)


#: a whole kernel hex mask: comma-separated words of 1-8 hex digits
_MASK = re.compile(r"(?:[0-9a-fA-F]{1,8},)*[0-9a-fA-F]{1,8}")
_ZERO_WORDS = "00000000," * 2112


def parse_mask(text: str) -> CPUSet:
    """``CPUSet.from_mask`` in one regex match instead of one per word.

    Old kernels size every mask to NR_CPUS (4096 bits: 128 words, nearly all
    zero) and a 128-CPU machine has hundreds of them; matching word by word
    was most of the reading's time there. Same syntax accepted, same errors.
    """
    body = text.strip()
    if not body:
        return CPUSet()
    if len(body) > 9 * 2112:
        return CPUSet.from_mask(body)  # raises: too long
    # the kernel prints leading zero words as "00000000,": skip them by
    # bisecting on prefix comparisons (C speed), parse only what follows
    lo, hi = 0, len(body) // 9
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if body.startswith(_ZERO_WORDS[: mid * 9]):
            lo = mid
        else:
            hi = mid - 1
    body = body[lo * 9 :]
    if _MASK.fullmatch(body) is None:
        return CPUSet.from_mask(text)  # raises with the word at fault
    value = 0
    for word in body.split(","):
        value = (value << 32) | int(word, 16)
    return CPUSet.from_int(value)


class Notes:
    """Collects warnings while reading; aggregates per-CPU ones into one line each.

    A 256-CPU machine without ``die_id`` should produce one line naming the CPUs,
    not 256 lines.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._per_cpu: dict[str, set[int]] = defaultdict(set)

    def warn(self, message: str) -> None:
        if message not in self.lines:
            self.lines.append(message)

    def cpu(self, cpu_id: int, issue: str) -> None:
        """Note ``issue`` for one CPU; rendered as "cpus 0-7: issue"."""
        self._per_cpu[issue].add(cpu_id)

    def finish(self, *, log: bool = True) -> tuple[str, ...]:
        for issue, cpus in self._per_cpu.items():
            self.warn(f"cpus {CPUSet(cpus)}: {issue}")
        self._per_cpu.clear()
        if log:
            _log_warnings(self.lines)
        return tuple(self.lines)

    # -- typed reads ----------------------------------------------------------
    def text(self, path: str, *, stream: bool = False) -> str | None:
        """File text; NULs (left by some snapshot tools and old kernels) dropped."""
        try:
            raw = read_text(path, stream=stream)
            return raw.replace("\x00", "") if raw is not None and "\x00" in raw else raw
        except OSError as e:
            self.warn(f"cannot read {path}: {e.strerror or e}")
            return None

    def integer(self, path: str) -> int | None:
        raw = self.text(path)
        if raw is None:
            return None
        try:
            return int(raw.strip())
        except ValueError:
            self.warn(f"{path}: expected an integer, got {raw.strip()[:40]!r}")
            return None

    def cpuset(
        self,
        list_path: str,
        mask_path: str | None = None,
        *,
        containing: int | None = None,
        first_is_mask: bool = False,
    ) -> CPUSet | None:
        """A list-format file, falling back to its hex-mask twin; None if neither is usable.

        ``containing``: the CPU whose own file this is. A set without it is
        inconsistent (seen in hand-edited snapshots where list and mask
        disagree), so the other format is tried before giving up.
        ``first_is_mask``: the first path is the mask and the second the list.
        """
        candidates = [(list_path, first_is_mask)] + ([(mask_path, not first_is_mask)] if mask_path else [])
        return self.first_cpuset(candidates, containing=containing)

    def first_cpuset(self, candidates: Iterable[tuple[str, bool]], *, containing: int | None = None) -> CPUSet | None:
        """The first usable set among (path, is_mask) candidates."""
        for path, is_mask in candidates:
            raw = self.text(path)
            if raw is None:
                continue
            try:
                value = parse_mask(raw) if is_mask else CPUSet.parse(raw)
            except CPUSetError as e:
                self.warn(f"{path}: {e}")
                continue
            if containing is None or containing in value:
                return value
        return None




_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int | None:
    """Cache sizes as sysfs writes them ("32K", "30720K", "8M"); None if not that."""
    body = text.strip().upper().removesuffix("B")
    unit = body[-1:] if body[-1:] in ("K", "M", "G") else ""
    digits = body[: len(body) - len(unit)]
    if not digits.isdigit():
        return None
    return int(digits) * _SIZE_UNITS[unit]


def listdir_ids(path: str, prefix: str) -> list[int]:
    """Ids N of entries named ``prefixN`` in a directory (cpuN, nodeN, indexN), ascending."""
    out = []
    try:
        with os.scandir(path) as it:
            for e in it:
                tail = e.name[len(prefix) :]
                if e.name.startswith(prefix) and tail.isdigit():
                    out.append(int(tail))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(out)
