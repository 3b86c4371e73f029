"""agent.cgroups.kill on the real kernel: a workload subtree dies whole (v1 by signals,
the v2 unified mount through cgroup.kill), and nothing outside the allowed roots is
read or signalled, whatever the path says."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from agent.cgroups.kill import kill_cgroup
from agent.cgroups.paths import CgroupPathError
from agent.cgroups.mounts import cgroup_mounts
from tests.cgroup_support import spawn_in

pytestmark = [pytest.mark.root]


class Tree:
    """/<mount>/hwagent-test-<pid>-<rand>/... in one hierarchy, removed with its processes."""

    def __init__(self, mount: Path) -> None:
        self.mount = mount
        self.name = f"hwagent-test-{os.getpid()}-{secrets.token_hex(3)}"
        self.procs: list[subprocess.Popen] = []

    @property
    def root(self) -> str:
        return f"/{self.name}"

    def make(self, rel: str) -> Path:
        d = self.mount / self.name / rel
        d.mkdir(parents=True, exist_ok=True)
        return d

    def spawn(self, rel: str, argv: list[str] | None = None) -> subprocess.Popen:
        d = self.make(rel)

        p = spawn_in([d], argv or ["sleep", "300"])
        self.procs.append(p)
        return p

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
        top = self.mount / self.name
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)  # the last exiting task may still be leaving
        if top.exists():
            top.rmdir()


@pytest.fixture
def mounts() -> dict[str, Path]:
    return cgroup_mounts()


@pytest.fixture
def tree(request, mounts):
    which = getattr(request, "param", "cpu")
    if which not in mounts:
        pytest.skip(f"no {which} cgroup mount here")
    t = Tree(mounts[which])
    yield t
    t.cleanup()


def test_v1_subtree_is_killed_whole_and_its_sibling_lives(tree: Tree, mounts) -> None:
    victims = [tree.spawn("pod-a/c1"), tree.spawn("pod-a/c1"), tree.spawn("pod-a/c1/nested")]
    bystander = tree.spawn("pod-b/c1")
    res = kill_cgroup(f"{tree.root}/pod-a", mounts, allowed_roots=[tree.root])
    assert (res.path, res.killed, res.remaining) == (f"{tree.root}/pod-a", 3, 0)
    assert "sigkill" in res.methods
    assert [p.wait(timeout=5) for p in victims] == [-9, -9, -9]
    assert bystander.poll() is None


def test_a_forking_workload_is_caught_by_the_next_round(tree: Tree, mounts) -> None:
    forker = tree.spawn("pod-f/c", ["/bin/sh", "-c", "while :; do sleep 100 & done"])
    time.sleep(0.3)
    res = kill_cgroup(f"{tree.root}/pod-f", mounts, allowed_roots=[tree.root], timeout_s=10)
    assert res.remaining == 0 and res.killed >= 2
    assert forker.wait(timeout=5) == -9
    assert (tree.mount / tree.name / "pod-f" / "c" / "cgroup.procs").read_text() == ""


@pytest.mark.parametrize("tree", ["v2"], indirect=True)
def test_v2_uses_cgroup_kill(tree: Tree, mounts) -> None:
    tree.make("pod-v")
    if not (tree.mount / tree.name / "pod-v" / "cgroup.kill").exists():
        pytest.skip("kernel without cgroup.kill (< 5.14)")
    victims = [tree.spawn("pod-v/c"), tree.spawn("pod-v/c/inner")]
    bystander = tree.spawn("pod-w/c")
    res = kill_cgroup(f"{tree.root}/pod-v", {"v2": mounts["v2"]}, allowed_roots=[tree.root])
    assert res.methods == ("cgroup.kill",) and res.killed == 2 and res.remaining == 0
    assert [p.wait(timeout=5) for p in victims] == [-9, -9]
    assert bystander.poll() is None


@pytest.mark.parametrize(
    "suffix",
    ["/..", "/pod-a/../..", "/../system.slice", "", "/pod-a/./c1"],
)
def test_escapes_are_refused_before_anything_is_signalled(tree: Tree, mounts, suffix: str) -> None:
    """The reported escape: "/kubepods/.." passed the old root check and reached system.slice."""
    inside = tree.spawn("pod-a/c1")
    with pytest.raises(CgroupPathError):
        kill_cgroup(f"{tree.root}{suffix}", mounts, allowed_roots=[tree.root])
    assert inside.poll() is None


def test_defaults_refuse_everything_outside_hwagent_and_kubepods(tree: Tree, mounts) -> None:
    p = tree.spawn("pod-a/c1")
    for path in (f"{tree.root}/pod-a", "/kubepods/..", "/system.slice", "/", "/kubepods"):
        with pytest.raises(CgroupPathError):
            kill_cgroup(path, mounts)
    assert p.poll() is None


def test_a_missing_cgroup_kills_nothing(mounts) -> None:
    res = kill_cgroup(f"/kubepods/pod-{secrets.token_hex(4)}/gone", mounts)
    assert (res.killed, res.remaining, res.methods) == (0, 0, ())
