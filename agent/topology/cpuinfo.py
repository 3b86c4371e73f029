"""/proc/cpuinfo as a last resort for package and core ids.

Kernels before 2.6.16 (and some odd architectures) have no
``cpuN/topology`` directory; their ``/proc/cpuinfo`` still carries
``physical id`` and ``core id`` per processor on x86 and ia64. Only used for
CPUs whose topology directory is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CpuinfoIds", "parse_cpuinfo"]


@dataclass(frozen=True)
class CpuinfoIds:
    package_id: int | None
    core_id: int | None


def parse_cpuinfo(text: str) -> dict[int, CpuinfoIds]:
    """processor number -> its package/core ids, for the blocks that name them."""
    out: dict[int, CpuinfoIds] = {}
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields.setdefault(key.strip().lower(), value.strip())
        proc = _int(fields.get("processor"))
        if proc is None:
            continue
        out[proc] = CpuinfoIds(_int(fields.get("physical id")), _int(fields.get("core id")))
    return out


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None
