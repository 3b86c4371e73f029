"""agent.cgroups.tree, .mounts and .own on the real kernel (hybrid here: v1 controllers and
an empty v2 at unified/), in a test-owned subtree that is removed afterwards."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agent.cgroups.mounts import MOUNTS, cgroup_mounts, read_mounts
from agent.cgroups.own import OWN_CPUSET, own_cpuset_files
from agent.cgroups.tree import cgroup_dirs, cgroup_procs, cgroup_thread_ids
from agent.cpuset import CPUSet

from .test_kill_real import Tree  # its fixtures (mounts, tree) come through conftest.py

pytestmark = [pytest.mark.root]


def test_mount_table_names_every_hierarchy_this_kernel_has() -> None:
    mounts = cgroup_mounts()
    assert mounts, "no cgroup mounted at all"
    for name, path in mounts.items():
        assert path.is_dir(), (name, path)
        if name == "v2":
            assert (path / "cgroup.controllers").is_file()
        else:
            assert (path / "cgroup.procs").is_file() and (path / "tasks").is_file()
    # the same table through the procfs-wide view, which a snapshot carries
    assert {m.mountpoint for m in read_mounts("/proc", MOUNTS) if m.fstype in ("cgroup", "cgroup2")} >= {
        str(p) for p in mounts.values()}


def test_own_cpuset_files_are_the_kernels_answer() -> None:
    cpuset_path = Path("/proc", OWN_CPUSET).read_text()
    files = own_cpuset_files(cpuset_path, read_mounts("/proc", MOUNTS), "/")
    if files is None:
        pytest.skip("no cpuset-capable mount here")
    cpus = CPUSet.parse(Path(files[0]).read_text())
    assert cpus >= CPUSet(os.sched_getaffinity(0))  # affinity narrows the cpuset, never widens it


@pytest.mark.parametrize("tree", ["cpu"], indirect=True)
def test_subtree_walk_procs_and_threads(tree: Tree) -> None:
    a = tree.spawn("pod/a")
    b = tree.spawn("pod/a/nested")
    tree.make("pod/empty")
    dirs = cgroup_dirs(tree.mount, f"{tree.root}/pod")
    assert {d.relative_to(tree.mount / tree.name).as_posix() for d in dirs} == {
        "pod", "pod/a", "pod/a/nested", "pod/empty"}
    assert cgroup_procs(dirs) == {a.pid, b.pid}
    assert set(cgroup_thread_ids(tree.mount, f"{tree.root}/pod")) == {a.pid, b.pid}  # sleep is one thread
    assert cgroup_dirs(tree.mount, f"{tree.root}/gone") == []


@pytest.mark.parametrize("tree", ["cpu"], indirect=True)
def test_thread_ids_list_every_thread_of_a_process(tree: Tree) -> None:
    d = tree.make("threads")
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    me = threading.get_native_id()
    try:
        assert worker.native_id is not None
        (d / "tasks").write_text(str(worker.native_id))  # v1 moves one thread
        assert cgroup_thread_ids(tree.mount, f"{tree.root}/threads") == [worker.native_id]
        assert me not in cgroup_thread_ids(tree.mount, f"{tree.root}/threads")
    finally:
        (tree.mount / "tasks").write_text(str(worker.native_id))
        stop.set()
        worker.join()


def test_a_link_out_of_the_mount_is_not_walked(tmp_path: Path) -> None:
    """Fixture tree: cgroupfs has no links, so one here means a path that escapes."""
    mount = tmp_path / "cg"
    (mount / "pod").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (mount / "pod" / "escape").symlink_to(tmp_path / "outside")
    assert [d.name for d in cgroup_dirs(mount, "/pod")] == ["pod"]
    assert cgroup_dirs(mount, "/pod/escape") == []
    assert cgroup_dirs(mount, "/") == [mount, mount / "pod"]
