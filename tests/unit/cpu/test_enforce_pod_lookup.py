"""The enforcer's pass finds pod cgroups from one listing of the kubepods layouts, not from
six stats per pod: on an NRI node (the runtime applies the cpusets, so the CPU policy holds
1,000 pods none of whose cgroups it finds under the kubelet's names) each pass after each
placement stat'ed 6,000 paths, 45 ms of CPU (issue 34). Same answers as ``find_pod_cgroup``
on a tree with every layout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.cgroups.paths import PodCgroups, find_pod_cgroup
from agent.cpu.enforce import Enforcer, plan_cgroups
from agent.cpu.qos import DEDICATED, SHARED
from agent.cpu.state import PolicyState, moved_keys

from .helpers import Clock, make_policy, req

UIDS = [f"0f2a7c1e-0000-0000-0000-{i:012d}" for i in range(8)]
LAYOUTS = [
    "/kubepods/pod{u}", "/kubepods/burstable/pod{u}", "/kubepods/besteffort/pod{u}",
    "/kubepods.slice/kubepods-pod{s}.slice", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{s}.slice",
    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{s}.slice",
]


def test_the_listing_finds_what_the_stats_find(tmp_path: Path) -> None:
    for i, layout in enumerate(LAYOUTS):  # pod i under layout i, pods 6 and 7 nowhere
        u = UIDS[i]
        (tmp_path / layout.format(u=u, s=u.replace("-", "_")).lstrip("/")).mkdir(parents=True)
    (tmp_path / "kubepods" / "burstable" / f"pod{UIDS[6]}-not-a-dir").write_text("")
    found = PodCgroups(tmp_path)
    for u in UIDS:
        assert found.find(u) == find_pod_cgroup(tmp_path, u)
    assert [found.find(u) for u in UIDS[6:]] == [None, None]
    with pytest.raises(ValueError):
        found.find("../../system.slice")  # a uid that walks out is refused, as there


def test_a_pass_over_pods_without_cgroups_lists_the_layouts_instead_of_stating_each_pod(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = make_policy(Clock())
    for i in range(300):
        p.allocate(req(f"u{i}", "c", SHARED, cpus=0.1))
    p.allocate(req("d", "c", DEDICATED, cpus=2, binding=True, hint=(0,)))
    (tmp_path / "kubepods" / "burstable").mkdir(parents=True)
    calls = {"stat": 0, "list": 0, "resolved": 0}
    isdir, scandir = os.path.isdir, os.scandir

    def counted_isdir(path: object) -> bool:
        calls["stat"] += 1
        return isdir(path)  # type: ignore[arg-type]

    def counted_scandir(path: object) -> object:
        calls["list"] += 1
        return scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os.path, "isdir", counted_isdir)
    monkeypatch.setattr(os, "scandir", counted_scandir)
    resolve = PolicyState.pod

    def counted_pod(st: PolicyState, uid: str) -> object:
        calls["resolved"] += 1
        return resolve(st, uid)

    monkeypatch.setattr(PolicyState, "pod", counted_pod)

    class FS:
        cpuset_root = tmp_path

    plan = plan_cgroups(FS(), p.state)  # type: ignore[arg-type]
    assert plan.targets == {} and plan.unresolved == []
    # no pod stat'ed, and none of them resolved (a pass has nothing to do for a pod without a cgroup)
    assert calls["stat"] == 0 and calls["list"] <= 6 and calls["resolved"] == 0, calls


def test_a_pass_after_a_change_looks_at_the_moved_pods_and_those_whose_cgroup_appeared(tmp_path: Path) -> None:
    """``only``: the pods the policy moved; a pod whose cgroup appeared since the last pass
    (allocated before its runtime made the cgroup) is enforced by the next pass too; a
    full pass still finds drift anywhere."""
    from tests.unit.cpu.test_enforce_periodic import A, B, v2_tree

    fs = v2_tree(tmp_path, {"p1": [A]})
    p = make_policy(Clock())
    p.allocate(req("p1", "app"))
    p.allocate(req("p2", "app"))  # its cgroup comes later
    e = Enforcer(fs)
    e.sync(p.state)  # full: p1 written
    p1 = tmp_path / "kubepods.slice" / "kubepods-podp1.slice" / f"cri-containerd-{A}.scope" / "cpuset.cpus"
    p1.write_text("0-15\n")  # drift a partial pass does not look for
    pod2 = tmp_path / "kubepods.slice" / "kubepods-podp2.slice" / f"cri-containerd-{B}.scope"
    pod2.mkdir(parents=True)
    (pod2 / "cpuset.cpus").write_text("\n")
    (pod2 / "cpuset.mems").write_text("\n")
    before = p.state
    p.allocate(req("p3", "app"))
    moved = {uid for uid, _ in moved_keys(before, p.state) or ()}
    assert moved == {"p3"}
    rep = e.sync(p.state, only=moved)
    assert rep.applied == [f"/kubepods.slice/kubepods-podp2.slice/cri-containerd-{B}.scope"]  # appeared
    assert rep.drift == [] and p1.read_text() == "0-15\n"
    rep = e.sync(p.state)  # the periodic full pass
    assert [d[0] for d in rep.drift] == [f"/kubepods.slice/kubepods-podp1.slice/cri-containerd-{A}.scope"]
