"""The static manifest directory reads only regular files in it: a link is refused, never followed."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agent.workloads.manifestdir import ManifestDir

MANIFEST = "metadata: {name: NAME}\nspec:\n  containers: [{name: main, command: [/bin/true]}]\n"


class _Registry:
    def records(self) -> list:
        return []


class _Workloads:
    """Only what ManifestDir asks of admission: what it admitted, by name."""

    def __init__(self) -> None:
        self.registry = _Registry()
        self.admitted: list[str] = []

    async def admit(self, spec) -> None:
        self.admitted.append(spec.name)

    async def remove(self, name: str, namespace: str) -> None:
        raise AssertionError("nothing admitted here is removed in these tests")


def _sync(d: ManifestDir) -> None:
    asyncio.run(d.sync_once())


@pytest.fixture
def mdir(tmp_path) -> tuple[ManifestDir, _Workloads, Path]:
    w = _Workloads()
    d = tmp_path / "manifests"
    d.mkdir()
    return ManifestDir(d, w), w, tmp_path  # type: ignore[arg-type]


def test_a_link_to_a_file_outside_is_refused_with_a_clear_error(mdir):
    md, w, tmp = mdir
    outside = tmp / "elsewhere.yaml"
    outside.write_text(MANIFEST.replace("NAME", "stolen"))
    (md.dir / "pod.yaml").symlink_to(outside)
    (md.dir / "ok.yaml").write_text(MANIFEST.replace("NAME", "ok"))
    _sync(md)
    assert w.admitted == ["ok"]
    [(path, error)] = md.errors()
    assert path == str(md.dir / "pod.yaml")
    assert "symbolic link" in error and "regular file" in error
    _sync(md)  # a second pass does not admit it either
    assert w.admitted == ["ok"]


def test_a_link_to_etc_passwd_is_never_read(mdir):
    md, w, _tmp = mdir
    (md.dir / "passwd.yaml").symlink_to("/etc/passwd")
    _sync(md)
    assert w.admitted == []
    [(_path, error)] = md.errors()
    assert "symbolic link" in error
    assert "root:" not in error  # nothing of the target's content reaches the message


def test_a_fifo_is_refused_without_blocking(mdir):
    md, w, _tmp = mdir
    os.mkfifo(md.dir / "pipe.yaml")
    _sync(md)  # a blocking open would hang here
    assert w.admitted == []
    [(_path, error)] = md.errors()
    assert "regular file" in error


def test_a_manifest_dir_that_is_a_link_under_the_root_dir_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "manifests").symlink_to(outside)
    md = ManifestDir(root / "manifests", _Workloads(), root_dir=root)  # type: ignore[arg-type]

    async def start() -> None:
        await md.start()

    with pytest.raises(OSError, match="symbolic link"):
        asyncio.run(start())
