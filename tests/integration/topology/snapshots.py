"""The extracted snapshot root, checked to hold a sys/ tree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["snapshot_root"]


def snapshot_root(hwloc_extract: Callable[[str], Path], name: str) -> Path:
    """The extracted snapshot's root (holding sys/ and proc/)."""
    root = hwloc_extract(name)
    assert (root / "sys").is_dir(), f"{name}: no sys/ under {root}"
    return root
