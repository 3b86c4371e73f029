"""Byte counts as a person reads them: 1536 -> "1.5 KiB".

A module of its own, importing nothing: `hwagent memory` prints its table with it and starts
without the topology model (dataclasses, functools) that agent.topology.render brings.
"""

from __future__ import annotations

__all__ = ["human_bytes"]

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def human_bytes(n: int | None) -> str:
    """1536 -> "1.5 KiB"; whole numbers lose the ".0"; None -> "unknown"."""
    if n is None:
        return "unknown"
    value = float(n)
    unit = 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    text = f"{value:.1f}".removesuffix(".0")
    return f"{text} {_UNITS[unit]}"
