"""Shared test fixtures: the hwloc snapshots in ../shared and root detection."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """../shared beside the checkout (CI lays a copy there), or $HWAGENT_SHARED."""
    env = os.environ.get("HWAGENT_SHARED")
    return Path(env) if env else REPO.parent / "shared"


HWLOC_DIR = shared_dir() / "fixtures" / "hwloc-linux"


def hwloc_snapshot_names() -> list[str]:
    return sorted(p.name[: -len(".tar.bz2")] for p in HWLOC_DIR.glob("*.tar.bz2"))


@pytest.fixture(scope="session")
def hwloc_extract(tmp_path_factory):
    """Callable: snapshot name -> directory holding its sys/ and proc/ (extracted once)."""
    base = tmp_path_factory.mktemp("hwloc")
    done: dict[str, Path] = {}

    def extract(name: str) -> Path:
        if name not in done:
            with tarfile.open(HWLOC_DIR / f"{name}.tar.bz2") as tf:
                tf.extractall(base, filter="tar")
            done[name] = base / name
        return done[name]

    return extract


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (CI runs as root)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)
