"""The CPU policy's enforcer writes cpuset.mems from the memory manager's affinity for a
container the memory manager placed (a two-node memory group beside one-node CPUs, or a
shared pod's pages), and from the CPUs' nodes otherwise, as before."""

from __future__ import annotations

from agent.cpu.enforce import plan_cgroups
from agent.cpuset import CPUSet
from tests.unit.cpu.helpers import make_policy, req
from tests.unit.cpu.test_enforce_periodic import A, B, v2_tree

C = CPUSet.parse


def test_memory_affinity_wins_over_the_cpus_nodes(tmp_path) -> None:
    fs = v2_tree(tmp_path, {"p2": [A, B]})
    p = make_policy()
    p.allocate(req(uid="p2", container="x", qos="dedicated_cores", binding=True, exclusive=False, hint=(2,)))
    p.allocate(req(uid="sh", container="app"))
    x = "/kubepods.slice/kubepods-podp2.slice/cri-containerd-" + A + ".scope"
    p.set_cgroup_path("p2", "x", x)
    p.set_cgroup_path("sh", "app", "/kubepods.slice/kubepods-podsh.slice/app")
    placed = {("p2", "x"): C("2-3"), ("sh", "app"): C("1")}
    plan = plan_cgroups(fs, p.state, p.idx.numa_of, mems_of=lambda uid, c: placed.get((uid, c)))
    assert plan.mems[x] == C("2-3")  # the memory group, not the CPUs' node 2
    assert plan.mems["/kubepods.slice/kubepods-podsh.slice/app"] == C("1")  # a shared pod's pages
    plan = plan_cgroups(fs, p.state, p.idx.numa_of, mems_of=lambda uid, c: None)
    assert plan.mems == {x: C("2")}  # nothing placed: the CPUs' nodes for the NUMA-bound one only
