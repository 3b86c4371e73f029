"""Which of hwagent's devices a Slurm job holds, in Slurm's own words (pure parsing).

Slurm says a job's devices as bit indexes of the node's GRES records
(``scontrol show job -d``: ``Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:0)``), and the
records' order is slurmd's parse of gres.conf (``slurmd -G`` prints it: one
``Gres Name=gpu ... File=/dev/nvidia0`` line per record, in index order; checked
against the device a job may open in tests/integration/slurm/test_job_devices.py).
The record's files are the join with hwagent's devices (their nodes' host paths).

The devices cgroup cannot say it: on v1 Slurm leaves the default "allow" and denies
the devices a job was not given, and the kernel lists no exception then (docs/slurm.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["expand_hostlist", "parse_slurmd_gres", "parse_job_gres", "held_files"]

_G_LINE = re.compile(r"Gres Name=(?P<name>\S+) .*?File=(?P<files>\S+)")
_NODE_GRES = re.compile(r"Nodes=(?P<nodes>\S+) CPU_IDs=\S+ Mem=\S+ GRES=(?P<gres>\S*)")
_JOB = re.compile(r"^JobId=(\d+)\b")
#: one GRES of a job on a node: name[:type]:count(IDX:list)
_ONE = re.compile(r"(?P<name>[A-Za-z0-9_.-]+)(?::[^:(,]+)?(?::\d+)?\(IDX:(?P<idx>[0-9,\-]+)\)")


def _ranges(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"not an index list: {text!r}")
        a, b = int(lo), int(hi) if hi else int(lo)
        if b - a > 4096:
            raise ValueError(f"index range too large: {part!r}")
        out.extend(range(a, b + 1))
    return out


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list (``n1``, ``n[1-3,5]``, ``a1,b[2-3]``) as names; widths kept (``n[01-02]``)."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?(?:,|$)", text):
        prefix, body = m.group(1), m.group(2)
        if body is None:
            out.append(prefix)
            continue
        for part in body.split(","):
            lo, _, hi = part.partition("-")
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{i:0{width}d}")
    return out


def parse_slurmd_gres(text: str) -> dict[str, list[tuple[str, ...]]]:
    """``slurmd -G``'s lines -> GRES name -> each record's files, in index order (records
    without files, counted only, have no devices to name and take no index of their own here)."""
    out: dict[str, list[tuple[str, ...]]] = {}
    for m in _G_LINE.finditer(text):
        files = m.group("files")
        if files == "(null)":
            continue
        out.setdefault(m.group("name"), []).append(tuple(files.split(",")))
    return out


def parse_job_gres(text: str, node: str) -> dict[str, dict[str, list[int]]]:
    """``scontrol show job -d -o``'s lines -> job id -> GRES name -> the indexes it holds on ``node``."""
    out: dict[str, dict[str, list[int]]] = {}
    for line in text.splitlines():
        jm = _JOB.match(line)
        if jm is None:
            continue
        held: dict[str, list[int]] = {}
        for nm in _NODE_GRES.finditer(line):
            if node not in expand_hostlist(nm.group("nodes")):
                continue
            for one in _ONE.finditer(nm.group("gres")):
                try:
                    held.setdefault(one.group("name"), []).extend(_ranges(one.group("idx")))
                except ValueError:
                    continue
        out[jm.group(1)] = held
    return out


def held_files(held: Mapping[str, Iterable[int]], records: Mapping[str, list[tuple[str, ...]]]) -> list[str]:
    """The device files of the records a job holds (an index past the records is skipped)."""
    out: list[str] = []
    for name, idxs in held.items():
        recs = records.get(name, [])
        for i in idxs:
            if 0 <= i < len(recs):
                out.extend(recs[i])
    return out
