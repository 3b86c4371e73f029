"""hwloc snapshot extraction for the cpu tests. Same contract as the shared
``hwloc_extract``; the tar ``filter`` argument is used only where Python has it
(Debian 12's 3.11.2 does not)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from tests.conftest import HWLOC_DIR


@pytest.fixture(scope="session")
def hwloc_extract(tmp_path_factory):
    base = tmp_path_factory.mktemp("hwloc-cpu")
    done: dict[str, Path] = {}
    kwargs = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}

    def extract(name: str) -> Path:
        if name not in done:
            with tarfile.open(HWLOC_DIR / f"{name}.tar.bz2") as tf:
                tf.extractall(base, **kwargs)
            done[name] = base / name
        return done[name]

    return extract
