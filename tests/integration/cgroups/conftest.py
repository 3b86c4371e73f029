"""A test-owned cgroup v1 subtree under the real cpuset and cpu controllers."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from .test_kill_real import mounts, tree  # noqa: F401 - fixtures: the kill tests' subtree, for the tree/mounts tests too

ROOT = Path("/sys/fs/cgroup")


def _rmtree_cgroup(path: Path) -> None:
    """Remove a cgroup subtree bottom-up, moving any tasks to the root first."""
    if not path.exists():
        return
    for sub in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        _evict(sub)
        sub.rmdir()
    _evict(path)
    path.rmdir()


def _evict(cg: Path) -> None:
    root = next(p for p in cg.parents if p.parent == ROOT)
    try:
        pids = (cg / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        try:
            (root / "cgroup.procs").write_text(pid)
        except OSError:
            pass


@pytest.fixture
def v1_sandbox():
    """(name, make_proc) — /sys/fs/cgroup/{cpuset,cpu}/hwagent-test-<rand>/ created and removed."""
    if not (ROOT / "cpuset" / "cpuset.cpus").exists():
        pytest.skip("no cgroup v1 cpuset controller here")
    name = f"hwagent-test-{secrets.token_hex(4)}"
    procs: list[subprocess.Popen] = []
    made = []
    for ctrl in ("cpuset", "cpu"):
        d = ROOT / ctrl / name
        d.mkdir()
        made.append(d)
    cs = ROOT / "cpuset" / name
    (cs / "cpuset.cpus").write_text((ROOT / "cpuset" / "cpuset.cpus").read_text())
    (cs / "cpuset.mems").write_text((ROOT / "cpuset" / "cpuset.mems").read_text())

    def make_proc(rel: str) -> subprocess.Popen:
        p = subprocess.Popen(["sleep", "300"])
        procs.append(p)
        (ROOT / "cpuset" / rel.lstrip("/") / "cgroup.procs").write_text(str(p.pid))
        return p

    try:
        yield name, make_proc
    finally:
        for p in procs:
            p.kill()
            p.wait()
        time.sleep(0.05)
        for d in made:
            _rmtree_cgroup(d)


def mkcg(rel: str, cpus: str | None = None, mems: str | None = "0") -> Path:
    d = ROOT / "cpuset" / rel.lstrip("/")
    d.mkdir(parents=True, exist_ok=True)
    if mems is not None and not (d / "cpuset.mems").read_text().strip():
        (d / "cpuset.mems").write_text(mems)
    if cpus is not None:
        (d / "cpuset.cpus").write_text(cpus)
    return d


def affinity(pid: int) -> set[int]:
    return set(os.sched_getaffinity(pid))
