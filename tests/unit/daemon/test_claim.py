"""The machine-wide claim on cgroup subtrees and CPUs: the decisions, and the files under flock."""

from __future__ import annotations

import json

import pytest

from agent.config import load
from agent.cpuset import CPUSet
from agent.daemon.claim import Claim, ClaimConflict, ClaimLock, find_conflict, lock_file_name, managed_claim
from agent.topology import synthetic

CG = "/sys/fs/cgroup"


def claim(pid: int, subtrees: tuple[str, ...], cpus: str, cgroup_root: str = CG) -> Claim:
    return Claim(pid, f"/var/lib/hw{pid}", cgroup_root, subtrees, CPUSet.parse(cpus))


@pytest.mark.parametrize(
    ("mine", "other", "words"),
    [
        (("/hwagent.slice",), ("/hwagent.slice",), "cgroup subtree /hwagent.slice under /sys/fs/cgroup"),
        (("/a/b",), ("/a",), "cgroup subtree /a (this daemon's /a/b overlaps it)"),
        (("/a",), ("/a/b",), "cgroup subtree /a/b (this daemon's /a overlaps it)"),
    ],
)
def test_the_same_or_a_nested_subtree_conflicts(mine, other, words):
    why = find_conflict(claim(1, mine, ""), [claim(2, other, "")])
    assert why is not None and words in why and "pid 2, root dir /var/lib/hw2" in why, why


def test_disjoint_subtrees_and_cpus_do_not_conflict():
    assert find_conflict(claim(1, ("/a",), "0-1"), [claim(2, ("/ab", "/b/a"), "2-3")]) is None
    # the same subtree name under another cgroup root (a fixture tree) is another cgroup
    assert find_conflict(claim(1, ("/a",), "0"), [claim(2, ("/a",), "1", cgroup_root="/tmp/cg")]) is None


def test_overlapping_cpus_conflict_and_say_which():
    why = find_conflict(claim(1, ("/a",), "0-3"), [claim(2, ("/b",), "3-5")])
    assert why is not None and "CPUs 3-5" in why and "(both: 3)" in why and "reserved_cpu_list" in why, why


def test_lock_file_names_are_one_per_path():
    assert lock_file_name(CG, "/hwagent.slice") == "sys-fs-cgroup-hwagent.slice.lock"
    names = {lock_file_name(CG, s) for s in ("/a-b", "/a/b", "/a_b", "/.a", "/a b", "/ä")}
    assert len(names) == 6
    assert all("/" not in n and not n.startswith(".") for n in names), names


def test_what_a_daemon_manages():
    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=4)
    every = CPUSet(c.id for c in topo.cpus)
    cfg = load(None).replace("cpu", reserved_cpu_list="0")
    c = managed_claim(cfg, topo, 7)
    assert c.pid == 7 and c.cpus == every - CPUSet([0]) and len(every) > 1
    assert "/hwagent.slice" in c.subtrees and "/kubepods" in c.subtrees
    assert managed_claim(load(None).replace("cpu", enabled=False), topo, 7).cpus == CPUSet()


def test_a_daemon_claims_its_reclaimed_pods_subtree_too():
    """Reclaimed pods' cgroups live in their own subtree (issue 26): a second daemon whose
    runtime subtree is, or lies in, the first's reclaimed subtree is refused."""
    from agent.config import loads

    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=4)
    mine = managed_claim(loads('[cpu]\nenabled = false\n[cgroups]\nruntime_subtree = "/jobs.slice"\n'), topo, 7)
    assert "/jobs-reclaimed.slice" in mine.subtrees
    other = managed_claim(loads('[cpu]\nenabled = false\n[cgroups]\nworkload_roots = []\n'
                                'runtime_subtree = "/jobs-reclaimed.slice/b"\n'), topo, 8)
    why = find_conflict(other, [mine])
    assert why is not None and "cgroup subtree /jobs-reclaimed.slice " in why, why


def claim_files(d) -> list[str]:
    return sorted(p.name for p in d.glob("*.lock") if not p.name.startswith("."))  # not the dir's own lock


def test_a_lock_holds_refuses_the_overlap_and_is_released(tmp_path):
    first, second = ClaimLock(tmp_path), ClaimLock(tmp_path)
    mine = claim(1, ("/a", "/b"), "0-1")
    first.acquire(mine)
    files = claim_files(tmp_path)
    assert files == [lock_file_name(CG, "/a"), lock_file_name(CG, "/b")]
    assert Claim.from_json((tmp_path / files[0]).read_text()) == mine
    with pytest.raises(ClaimConflict, match="pid 1, root dir /var/lib/hw1"):
        second.acquire(claim(2, ("/b",), ""))
    with pytest.raises(ClaimConflict, match="CPUs 0-1"):
        second.acquire(claim(2, ("/c",), "1"))
    assert not second.held and claim_files(tmp_path) == files  # nothing changed
    first.release()
    assert claim_files(tmp_path) == []
    second.acquire(claim(2, ("/b",), "1"))
    assert second.held
    second.release()


def test_a_file_nobody_holds_is_stale_and_taken_over(tmp_path):
    # what a daemon killed with -9 leaves: the file, with the kernel's flock gone
    stale = tmp_path / lock_file_name(CG, "/a")
    stale.write_text(claim(99, ("/a",), "0-7").to_json())
    (tmp_path / lock_file_name(CG, "/other")).write_text(claim(98, ("/other",), "0-7").to_json())
    lock = ClaimLock(tmp_path)
    lock.acquire(claim(1, ("/a",), "0"))
    assert json.loads(stale.read_text())["pid"] == 1
    assert not (tmp_path / lock_file_name(CG, "/other")).exists()  # stale ones are tidied on the way
    lock.release()
