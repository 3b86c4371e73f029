"""Where an hwloc snapshot lands once extracted.

A tarball's top directory is not always named like the tarball
(``20s390-2g6s4c.tar.bz2`` holds ``20s390-2g2g2s4co/``), so the directory is
taken from the archive itself.
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

from tests.conftest import HWLOC_DIR

__all__ = ["snapshot_root", "top_directory"]


@cache
def top_directory(name: str) -> str:
    with tarfile.open(HWLOC_DIR / f"{name}.tar.bz2") as tf:
        first = tf.next()
        assert first is not None, f"{name}.tar.bz2 is empty"
        return first.name.split("/")[0]


def snapshot_root(hwloc_extract: Callable[[str], Path], name: str) -> Path:
    """The extracted snapshot's root (holding sys/ and proc/)."""
    root = hwloc_extract(name).parent / top_directory(name)
    assert (root / "sys").is_dir(), f"{name}: no sys/ under {root}"
    return root
