"""Cgroup planning on a fake v2 kubepods tree, residual tracking, [cpu] config, view."""

from __future__ import annotations

import json
import pytest

from agent.cgroups.detect import detect
from agent.cgroups.fs import CgroupFS
from agent.config import ConfigError, loads
from agent.cpu.enforce import Enforcer, plan_cgroups
from agent.cpu.periodic import ResidualTracker
from agent.cpu.view import Allocation, render_table, summarize
from agent.cpuset import CPUSet

from .helpers import make_policy, req

C = CPUSet.parse
A, B = "a" * 64, "b" * 64


def v2_tree(tmp_path, pods):
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu\n")
    for uid, conts in pods.items():
        pod = tmp_path / "kubepods.slice" / f"kubepods-pod{uid}.slice"
        for c in conts:
            d = pod / f"cri-containerd-{c}.scope"
            d.mkdir(parents=True)
            (d / "cpuset.cpus").write_text("\n")
            (d / "cpuset.mems").write_text("\n")
    return CgroupFS(detect(tmp_path))


def test_plan_single_cpuset_pod_and_ambiguous_pod(tmp_path):
    fs = v2_tree(tmp_path, {"p1": [A, B], "p2": [A[:-1] + "1", B[:-1] + "1"]})
    p = make_policy()
    p.allocate(req(uid="p1", container="app"))  # one container: every scope gets its cpuset
    p.allocate(req(uid="p2", container="x", qos="dedicated_cores", binding=True, exclusive=False, hint=(2,)))
    p.allocate(req(uid="p2", container="y", qos="dedicated_cores", binding=True, exclusive=False, hint=(3,)))
    p.allocate(req(uid="gone", container="c"))  # no cgroup yet: nothing planned, not unresolved
    plan = plan_cgroups(fs, p.state, p.idx.numa_of)
    pod1 = "/kubepods.slice/kubepods-podp1.slice"
    assert plan.targets == {
        f"{pod1}/cri-containerd-{A}.scope": p.container("p1", "app").cpuset,
        f"{pod1}/cri-containerd-{B}.scope": p.container("p1", "app").cpuset,
    }
    assert sorted(plan.unresolved) == [("p2", "x"), ("p2", "y")]
    assert plan.mems == {}  # shared p1 is not NUMA-bound
    # an explicit path resolves the ambiguity for that container
    p.set_cgroup_path("p2", "x", f"/kubepods.slice/kubepods-podp2.slice/cri-containerd-{A[:-1]}1.scope")
    plan = plan_cgroups(fs, p.state, p.idx.numa_of)
    assert plan.targets[p.container("p2", "x").cgroup_path] == p.container("p2", "x").cpuset
    assert plan.mems[p.container("p2", "x").cgroup_path] == C("2")
    # the rest of the pod now holds one cpuset: y's, given to every other scope
    assert plan.unresolved == []
    assert plan.targets[f"/kubepods.slice/kubepods-podp2.slice/cri-containerd-{B[:-1]}1.scope"] == p.container(
        "p2", "y"
    ).cpuset


def test_enforcer_first_apply_is_not_drift_then_drift_is(tmp_path):
    fs = v2_tree(tmp_path, {"p1": [A]})
    p = make_policy()
    p.allocate(req(uid="p1", container="app"))
    e = Enforcer(fs)
    rep = e.sync(p.state)
    path = f"/kubepods.slice/kubepods-podp1.slice/cri-containerd-{A}.scope"
    assert rep.applied == [path] and rep.drift == []
    f = tmp_path / path.lstrip("/") / "cpuset.cpus"
    assert CPUSet.parse(f.read_text()) == p.container("p1", "app").cpuset
    assert e.sync(p.state).applied == []  # nothing to do
    f.write_text("0-15")
    rep = e.sync(p.state, repair=False)
    assert rep.drift == [(path, p.container("p1", "app").cpuset, C("0-15"))] and rep.repaired == []
    rep = e.sync(p.state)
    assert rep.repaired == [path] and CPUSet.parse(f.read_text()) == p.container("p1", "app").cpuset
    # allocation changes: a new value is an application, not drift
    p.remove_pod("p1")
    p.allocate(req(uid="p1", container="app", qos="dedicated_cores", binding=True, exclusive=False, hint=(2,)))
    e.numa_of = p.idx.numa_of
    rep = e.sync(p.state)
    assert CPUSet.parse(f.read_text()) == C("4,12")
    assert rep.applied == [path] and rep.drift == []
    # NUMA-bound: memory follows the CPUs' node, and its drift is repaired too
    m = tmp_path / path.lstrip("/") / "cpuset.mems"
    assert m.read_text() == "2"
    m.write_text("0-3")
    rep = e.sync(p.state)
    assert rep.drift == [(path, C("2"), C("0-3"))] and rep.repaired == [path] and m.read_text() == "2"


def test_residual_tracker():
    t = ResidualTracker(300)
    assert t.due(["a", "b"], frozenset({"a"}), 0) == []
    assert t.due(["a", "b"], frozenset({"a"}), 299) == []
    assert t.due(["a", "b"], frozenset({"a"}), 300) == ["b"]
    # reappearing resets the clock
    assert t.due(["a", "b"], frozenset({"a", "b"}), 301) == []
    assert t.due(["a", "b"], frozenset({"a"}), 302) == []
    assert t.due(["a", "b"], frozenset({"a"}), 602) == ["b"]
    t.forget("b")
    assert t.due(["a"], frozenset(), 603) == []


def test_cpu_config_section():
    cfg = loads('[cpu]\nreserved_cpu_list = "0,2"\nenhancement_defaults = {numa_exclusive = "true"}\n')
    assert cfg.sections["cpu"].reserved_list() == C("0,2")
    assert cfg.sections["cpu"].enhancement_defaults == {"numa_exclusive": "true"}
    for bad in ('reserved_cpu_list = "0-"', "cpuset_check_interval_s = 0", 'socket_name = "../x.sock"',
                "reserved_cpus = -1", "nosuchkey = 1"):  # fmt: skip
        with pytest.raises(ConfigError):
            loads(f"[cpu]\n{bad}\n")


def test_view_per_numa():
    numa = {0: C("0-1,8-9"), 1: C("2-3,10-11")}
    pools = {"reserve": C("0,2"), "share": C("1,3,9,11")}
    allocs = [Allocation("u1", "ns", "web", "c", "shared_cores", "share", C("1,3,9,11")),
              Allocation("u2", "ns", "db", "c", "dedicated_cores", "dedicated", C("8"))]  # fmt: skip
    s = summarize(numa, pools, allocs, "test")
    assert s["numa_nodes"][0]["pools"] == {"reserve": "0", "share": "1,9"}
    assert [c["cpus"] for c in s["numa_nodes"][0]["containers"]] == ["8", "1,9"]
    assert s["numa_nodes"][1]["cpus_without_container"] == "2,10"
    assert s["allocations"][1]["numa_nodes"] == [0, 1]
    text = render_table(s)
    assert "ns/web" in text and "reserve=0 share=1,9" in text
    json.dumps(s)
    assert "n/a" in render_table(summarize(numa, None, allocs, "socket"))
