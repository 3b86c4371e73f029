"""Topology tests' own ``hwloc_extract``: the shared one in tests/conftest.py
passes ``filter="tar"`` to ``TarFile.extractall``, which Debian 12's Python
3.11.2 does not have (it arrived in 3.11.4). Same contract (name -> base/name,
extracted once per session); the filter is used where Python offers it.
Drop this file once the shared fixture works on 3.11.2."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from tests.conftest import HWLOC_DIR


@pytest.fixture(scope="session")
def hwloc_extract(tmp_path_factory):
    base = tmp_path_factory.mktemp("hwloc-topology")
    done: dict[str, Path] = {}
    kwargs = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}

    def extract(name: str) -> Path:
        if name not in done:
            with tarfile.open(HWLOC_DIR / f"{name}.tar.bz2") as tf:
                tf.extractall(base, **kwargs)
            done[name] = base / name
        return done[name]

    return extract
