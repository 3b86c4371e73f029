"""Real-kernel fixtures: one shared BPF compile, test-owned cgroups, CPU hogs, loop devices."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from agent.cgroups.hierarchy import detect_hierarchy
from agent.cgroups.mounts import cgroup_mounts

from tests.cgroup_support import rmdir_cgroup, spawn_in

HOG = ["/bin/sh", "-c", "while :; do :; done"]


@pytest.fixture(scope="session")
def hierarchy():
    return detect_hierarchy("auto")


@pytest.fixture(scope="session")
def probe_set(hierarchy):
    """Every probe compiled once for the session (each compile costs ~0.5 s and ~60 MB)."""
    pytest.importorskip("bcc")
    from agent.pressure.probes import PROBES, ProbeSet

    ps = ProbeSet(list(PROBES), hierarchy=hierarchy.name)
    ps.load()
    if ps.bpf is None:
        pytest.fail(f"probes did not load: {ps.states}")
    yield ps
    ps.close()


class CgroupTree:
    """A test-owned subtree in one or more hierarchies; removed (with its processes) after."""

    def __init__(self, mounts: dict[str, Path]) -> None:
        self.name = f"hwagent-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.mounts = mounts
        self.procs: list[subprocess.Popen] = []
        self.made: list[Path] = []

    def make(self, ctl: str, rel: str) -> Path:
        d = self.mounts[ctl] / self.name / rel
        for p in reversed([d, *d.parents]):
            if p == self.mounts[ctl] or self.mounts[ctl] not in p.parents:
                continue
            if not p.exists():
                p.mkdir()
                self.made.append(p)
        return d

    def rel(self, rel: str) -> str:
        return f"/{self.name}/{rel}"

    def spawn(self, dirs: list[Path], argv: list[str] = HOG) -> subprocess.Popen:
        p = spawn_in(dirs, argv)
        self.procs.append(p)
        return p

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for d in sorted(self.made, key=lambda p: len(p.parts), reverse=True):
            rmdir_cgroup(d, tries=50, pause_s=0.05)


@pytest.fixture
def cgroup_tree():
    tree = CgroupTree(cgroup_mounts())
    try:
        yield tree
    finally:
        tree.cleanup()
