"""Fixture trees for device tests. The snapshots' top directory is not always
the tarball's name (32em64t-2n8c+dax+nvme+mic+dimms unpacks to
32em64t-2n8c+1mic), so the root is taken from the archive itself."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from tests.conftest import HWLOC_DIR


@pytest.fixture(scope="session")
def hwloc_root(tmp_path_factory):
    """Callable: snapshot name -> its extracted root (holding sys/ and proc/)."""
    base = tmp_path_factory.mktemp("hwloc-devices")
    done: dict[str, Path] = {}

    def extract(name: str) -> Path:
        if name not in done:
            archive = HWLOC_DIR / f"{name}.tar.bz2"
            if not archive.exists():
                pytest.skip(f"hwloc snapshot {name} not present in {HWLOC_DIR}")
            with tarfile.open(archive) as tf:
                top = tf.getnames()[0].split("/")[0]
                # as root, tarfile would chown every file to the snapshot's users
                # (a name lookup each: seconds on this machine); ownership is irrelevant here
                tf.chown = lambda *a, **k: None  # type: ignore[method-assign]
                members = [m for m in tf.getmembers() if "/proc/" not in m.name and "/sys/firmware/" not in m.name]
                # extraction filters arrived in 3.11.4; Debian 12 ships 3.11.2
                kw = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
                tf.extractall(base / name, members=members, **kw)
            done[name] = base / name / top
        return done[name]

    return extract
