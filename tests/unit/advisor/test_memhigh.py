"""The memory.high writer (agent.advisor.memhigh) and its cgroupfs calls, on a fixture cgroup v2
tree (a tmp dir laid out as a v2 hierarchy with the memory controller): values written, each
cgroup's own value put back, a vanished cgroup not an error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.advisor.memhigh import MemoryHigh, memory_high_supported
from agent.cgroups.detect import CgroupLayout
from agent.cgroups.fs import CgroupFS, CgroupVanished

MiB = 1 << 20


def tree(tmp: Path, pods: dict[str, str]) -> CgroupFS:
    (tmp / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for name, own in pods.items():
        d = tmp / "kubepods" / name
        d.mkdir(parents=True)
        (d / "memory.high").write_text(own + "\n")
        (d / "memory.current").write_text(f"{300 * MiB}\n")
    return CgroupFS(CgroupLayout("v2", tmp, frozenset({"cpuset", "cpu", "memory"})))


def high(tmp: Path, name: str) -> str:
    return (tmp / "kubepods" / name / "memory.high").read_text().strip()


def test_fs_reads_and_writes_memory_high_and_current(tmp_path):
    fs = tree(tmp_path, {"a": "max", "b": str(500 * MiB)})
    assert fs.read_memory_high("/kubepods/a") is None
    assert fs.read_memory_high("/kubepods/b") == 500 * MiB
    assert fs.read_memory_current("/kubepods/a") == 300 * MiB
    assert fs.write_memory_high("/kubepods/a", 100 * MiB) is True
    assert high(tmp_path, "a") == str(100 * MiB)
    assert fs.write_memory_high("/kubepods/a", 100 * MiB) is False  # unchanged: no write
    assert fs.write_memory_high("/kubepods/a", None) is True and high(tmp_path, "a") == "max"
    with pytest.raises(CgroupVanished):
        fs.read_memory_current("/kubepods/gone")
    with pytest.raises(CgroupVanished):
        fs.write_memory_high("/kubepods/gone", 100 * MiB)


def test_written_then_each_cgroups_own_value_put_back(tmp_path):
    fs = tree(tmp_path, {"a": "max", "b": str(500 * MiB)})
    w = MemoryHigh(fs)
    written = w.apply({"/kubepods/a": 200 * MiB, "/kubepods/b": 250 * MiB})
    assert written == ["/kubepods/a", "/kubepods/b"]
    assert high(tmp_path, "a") == str(200 * MiB) and high(tmp_path, "b") == str(250 * MiB)
    assert w.originals == {"/kubepods/a": None, "/kubepods/b": 500 * MiB}
    # a second step keeps the first originals
    w.apply({"/kubepods/a": 150 * MiB, "/kubepods/b": 200 * MiB})
    assert w.originals == {"/kubepods/a": None, "/kubepods/b": 500 * MiB}
    # b no longer in the plan (no longer reclaimed): its own value back; a stays
    w.apply({"/kubepods/a": 150 * MiB})
    assert high(tmp_path, "b") == str(500 * MiB) and high(tmp_path, "a") == str(150 * MiB)
    assert set(w.originals) == {"/kubepods/a"}
    w.release()
    assert high(tmp_path, "a") == "max" and w.originals == {} and w.applied == {}


def test_never_looser_than_the_pods_own_high(tmp_path):
    fs = tree(tmp_path, {"b": str(100 * MiB)})
    w = MemoryHigh(fs)
    w.apply({"/kubepods/b": 200 * MiB})
    assert high(tmp_path, "b") == str(100 * MiB)


def test_a_vanished_cgroup_is_not_an_error(tmp_path):
    fs = tree(tmp_path, {"a": "max", "b": "max"})
    w = MemoryHigh(fs)
    w.apply({"/kubepods/a": 200 * MiB, "/kubepods/b": 200 * MiB})
    shutil.rmtree(tmp_path / "kubepods" / "a")
    # still planned but gone: forgotten, the other still written
    assert w.apply({"/kubepods/a": 100 * MiB, "/kubepods/b": 100 * MiB}) == ["/kubepods/b"]
    assert set(w.originals) == {"/kubepods/b"}
    shutil.rmtree(tmp_path / "kubepods" / "b")
    assert w.release() == [] and w.originals == {}  # restoring a gone cgroup: nothing to do


def test_originals_saved_by_a_previous_run_are_put_back(tmp_path):
    fs = tree(tmp_path, {"a": str(120 * MiB)})
    (tmp_path / "kubepods" / "a" / "memory.high").write_text(f"{80 * MiB}\n")  # the last run's value
    w = MemoryHigh(fs, {"/kubepods/a": None})
    w.release()
    assert high(tmp_path, "a") == "max"


def test_supported_only_with_the_memory_controller_on_v2(tmp_path):
    assert memory_high_supported(CgroupLayout("v2", tmp_path, frozenset({"memory"}))) is None
    why = memory_high_supported(CgroupLayout("v2", tmp_path, frozenset({"cpu"})))
    assert why is not None and "memory controller" in why
    (tmp_path / "memory").mkdir()
    why = memory_high_supported(CgroupLayout("hybrid", tmp_path, frozenset()))
    assert why is not None and "cgroup v1" in why
