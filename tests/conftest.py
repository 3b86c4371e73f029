"""Shared test fixtures: the hwloc snapshots in tests/fixtures and root detection."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

#: hwloc's Linux sysfs snapshots, carried in the repository (provenance and
#: licence in its README.md) so that a clone on its own passes its tests
HWLOC_DIR = REPO / "tests" / "fixtures" / "hwloc-linux"


def hwloc_snapshot_names() -> list[str]:
    return sorted(p.name[: -len(".tar.bz2")] for p in HWLOC_DIR.glob("*.tar.bz2"))


@pytest.fixture(scope="session")
def hwloc_extract(tmp_path_factory):
    """Callable: snapshot name -> the extracted snapshot root (holding sys/ and proc/).

    Extracted once per session into its own folder. The root is the archive's
    top directory, which is not always the tarball's name
    (``20s390-2g6s4c.tar.bz2`` holds ``20s390-2g2g2s4co/``).
    """
    base = tmp_path_factory.mktemp("hwloc")
    done: dict[str, Path] = {}
    # extraction filters arrived in Python 3.11.4; Debian 12 ships 3.11.2
    kwargs = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}

    def extract(name: str) -> Path:
        if name not in done:
            archive = HWLOC_DIR / f"{name}.tar.bz2"
            if not archive.exists():
                pytest.fail(f"hwloc snapshot {name} not found in {HWLOC_DIR}")
            with tarfile.open(archive) as tf:
                top = tf.getnames()[0].split("/")[0]
                # as root tarfile would chown every file to the snapshot's users,
                # a name lookup each; ownership is irrelevant to these trees
                tf.chown = lambda *a, **k: None  # type: ignore[method-assign]
                tf.extractall(base / name, **kwargs)
            done[name] = base / name / top
        return done[name]

    return extract


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A temp dir with a short path, for tests that bind unix sockets deep under it: a socket
    path holds at most 107 bytes, and pytest's ``/tmp/pytest-of-root/pytest-1032/<test name>/``
    passes that once the run counter and the test's name are long. A directory's conftest
    overrides ``tmp_path`` with it where its tests bind the kubelet's socket tree."""
    d = Path(tempfile.mkdtemp(prefix="hwt-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (CI runs as root)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)
