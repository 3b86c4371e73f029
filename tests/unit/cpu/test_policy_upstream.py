"""The upstream v0.5.3 policy_test.go scenarios on the 16-CPU / 2-socket / 4-NUMA fixture."""

from __future__ import annotations

import pytest

from agent.cpu.calculator import TopoIndex, take_by_numa_balance, take_by_topology, take_ht_by_numa_balance
from agent.cpu.errors import PolicyError
from agent.cpu.qos import QOS_KEY
from agent.cpu.state import machine_state
from agent.cpuset import CPUSet

from .helpers import Clock, make_policy, req, upstream_topology

C = CPUSet.parse


def test_fixture_numbering_matches_upstream():
    idx = TopoIndex(upstream_topology())
    assert [str(CPUSet(idx.numa_cpus[n])) for n in idx.numa_ids] == ["0-1,8-9", "2-3,10-11", "4-5,12-13", "6-7,14-15"]
    assert idx.topology.siblings(3) == C("3,11")
    assert {s: sorted(v) for s, v in idx.socket_numas.items()} == {0: [0, 1], 1: [2, 3]}


def test_reserved_and_reclaim_init():
    p = make_policy()
    assert p.reserved == C("0,2")
    assert p.state.pools["reserve"] == C("0,2")
    assert p.state.pools["reclaim"] == C("1,3,9,11")


def test_reserved_four():
    idx = TopoIndex(upstream_topology())
    assert take_ht_by_numa_balance(idx, C("0-15"), 4) == C("0,2,4,6")


def test_allocatable_resources():
    cap, alloc = make_policy().allocatable()
    assert cap == {0: 4, 1: 4, 2: 4, 3: 4}
    assert alloc == {0: 3, 1: 3, 2: 4, 3: 4}


def test_init_container_gets_nothing_stored():
    p = make_policy()
    r = p.allocate(req(ctype="INIT", cpus=1))
    assert r.allocation is None and not r.debug
    assert r.labels == {QOS_KEY: "shared_cores"} and r.annotations == {QOS_KEY: "shared_cores"}
    with pytest.raises(PolicyError) as e:
        p.container("pod1", "c1")
    assert e.value.code == "NOT_FOUND"


def test_debug_pod():
    p = make_policy(debug_annotation_keys=("podDebugAnnoKey",))
    r = p.allocate(req(extra_annotations={"podDebugAnnoKey": ""}))
    assert r.debug and r.allocation is None
    assert r.labels == {QOS_KEY: "shared_cores"}
    h = p.get_topology_hints(req(extra_annotations={"podDebugAnnoKey": ""}))
    assert h.hints is None
    assert p.state.entries == {}


def test_shared_ramp_up_then_pool():
    clock = Clock()
    p = make_policy(clock)
    r = p.allocate(req(cpus=2))
    assert r.allocation.cpuset == C("1,3-15") and len(r.allocation.cpuset) == 14
    assert r.allocation.ramp_up and r.allocation.owner_pool_name == ""
    assert [len(v) for v in p.assignments(r.allocation.cpuset).values()] == [3, 3, 4, 4]
    clock.t += 31
    allocs = {a.container_name: a for a in p.resources_allocation()}
    a = allocs["c1"]
    assert not a.ramp_up and a.owner_pool_name == "share"
    assert a.cpuset == C("1,3-6,9,11-14")
    assert [len(v) for v in p.assignments(a.cpuset).values()] == [2, 2, 4, 2]
    assert p.state.pools["reclaim"] == C("7-8,10,15")
    r2 = p.allocate(req(uid="pod2", qos="reclaimed_cores", cpus=2))
    assert r2.allocation.cpuset == C("7-8,10,15") and r2.allocation.owner_pool_name == "reclaim"


def test_reclaimed_on_fresh_state():
    p = make_policy()
    r = p.allocate(req(qos="reclaimed_cores", cpus=2))
    assert r.allocation.cpuset == C("1,3,9,11")
    assert {n: len(c) for n, c in p.assignments(r.allocation.cpuset).items()} == {0: 2, 1: 2}


@pytest.mark.parametrize(
    "exclusive,defaults,expect",
    [
        (True, {}, "1,8-9"),
        (False, {}, "1,9"),
        (None, {"numa_exclusive": "true"}, "1,8-9"),
        (None, {}, "1,9"),
    ],
)
def test_dedicated_numa_binding(exclusive, defaults, expect):
    p = make_policy(enhancement_defaults=defaults)
    r = p.allocate(req(qos="dedicated_cores", binding=True, exclusive=exclusive, hint=(0,)))
    assert r.allocation.cpuset == C(expect)
    assert r.allocation.owner_pool_name == "dedicated" and r.allocation.ramp_up
    want_ann = {QOS_KEY: "dedicated_cores", "numa_binding": "true"}
    if exclusive is not None:
        want_ann["numa_exclusive"] = "true" if exclusive else "false"
    want_ann.update(defaults)
    assert r.annotations == want_ann
    # NUMA0 left the shared pools: reclaim moved off it
    assert not (p.state.pools["reclaim"] & C("0-1,8-9"))


HINTS_EXCLUSIVE = [
    ((0,), True), ((1,), True), ((2,), True), ((3,), True),
    ((0, 1), False), ((2, 3), False),
    ((0, 1, 2), False), ((0, 1, 3), False), ((0, 2, 3), False), ((1, 2, 3), False),
    ((0, 1, 2, 3), False),
]  # fmt: skip


@pytest.mark.parametrize(
    "exclusive,defaults,expect",
    [
        (True, {}, HINTS_EXCLUSIVE),
        (False, {}, HINTS_EXCLUSIVE[:4]),
        (None, {"numa_exclusive": "true"}, HINTS_EXCLUSIVE),
        (None, {}, HINTS_EXCLUSIVE[:4]),
    ],
)
def test_hints_dedicated(exclusive, defaults, expect):
    p = make_policy(enhancement_defaults=defaults)
    h = p.get_topology_hints(req(qos="dedicated_cores", binding=True, exclusive=exclusive))
    assert [(x.nodes, x.preferred) for x in h.hints] == expect


@pytest.mark.parametrize("qos", [None, "reclaimed_cores", "shared_cores", "system_cores"])
def test_hints_none_for_non_dedicated(qos):
    assert make_policy().get_topology_hints(req(qos=qos)).hints is None


def test_regenerate_hints_for_existing():
    p = make_policy()
    r = p.allocate(req(qos="dedicated_cores", binding=True, exclusive=True, hint=(0, 1), cpus=6))
    assert r.allocation.cpuset == C("1,3,8-11")
    h = p.get_topology_hints(req(qos="dedicated_cores", binding=True, exclusive=True, cpus=2))
    assert [(x.nodes, x.preferred) for x in h.hints] == [((0, 1), True)]


def test_exclusive_hints_skip_numa_with_dedicated():
    p = make_policy()
    p.allocate(req(uid="a", qos="dedicated_cores", binding=True, exclusive=False, hint=(0,)))
    h = p.get_topology_hints(req(uid="b", qos="dedicated_cores", binding=True, exclusive=True))
    assert all(0 not in x.nodes for x in h.hints)
    assert ((1,), True) in [(x.nodes, x.preferred) for x in h.hints]


def test_remove_pod():
    p = make_policy()
    p.allocate(req(cpus=2))
    assert len(p.container("pod1", "c1").cpuset) == 14
    assert p.remove_pod("pod1")
    with pytest.raises(PolicyError, match="is not show up in cpu plugin state"):
        p.container("pod1", "c1")
    assert not p.remove_pod("pod1")


def test_shared_running_pod_joins_existing_pool():
    clock = Clock()
    p = make_policy(clock)
    p.allocate(req(uid="a"))
    clock.t += 31
    p.resources_allocation()
    p.pod_running = lambda uid: True
    r = p.allocate(req(uid="b", cpus=2))
    assert not r.allocation.ramp_up and r.allocation.owner_pool_name == "share"
    assert r.allocation.cpuset == p.state.pools["share"]
    assert p.container("a", "c1").cpuset == p.state.pools["share"]


def test_already_allocated_fast_path_no_change():
    p = make_policy()
    r1 = p.allocate(req(qos="dedicated_cores", binding=True, exclusive=False, hint=(2,)))
    st = p.state
    r2 = p.allocate(req(qos="dedicated_cores", binding=True, exclusive=False, hint=(3,)))
    assert r2.allocation == r1.allocation and p.state is st


def test_dedicated_shrinks_shared_and_restores_on_remove():
    clock = Clock()
    p = make_policy(clock)
    p.allocate(req(uid="s"))
    clock.t += 31
    p.resources_allocation()
    p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=True, hint=(3,)))
    share = p.state.pools["share"]
    assert not share & C("6-7,14-15")
    assert p.container("s", "c1").cpuset == share
    p.remove_pod("d")
    assert p.state.pools["share"] & C("6-7,14-15")


def test_sidecar_follows_main():
    p = make_policy()
    side = req(uid="p", container="side", qos="dedicated_cores", binding=True, exclusive=False, ctype="SIDECAR")
    r = p.allocate(side)
    assert r.empty and r.allocation is None and p.state.entries == {}
    main = p.allocate(req(uid="p", container="main", qos="dedicated_cores", binding=True, exclusive=False, hint=(1,)))
    r = p.allocate(side)
    assert r.allocation.cpuset == main.allocation.cpuset == C("3,11")
    # sidecars do not pin NUMA state on their own
    ms = machine_state(p.idx, p.state)
    assert ms[1].allocated_cpuset == C("3,11")


def test_system_cores_gets_all_cpus():
    p = make_policy()
    r = p.allocate(req(qos="system_cores", cpus=1))
    assert r.allocation.cpuset == C("0-15")


def test_pool_sizing_multiple_pools_and_overcommit():
    clock = Clock()
    p = make_policy(clock, reclaim_min=4)
    p.pod_running = lambda uid: True
    # seed pools by completing ramp-up
    p.allocate(req(uid="a", cpus=4, pool="batch"))
    p.allocate(req(uid="b", cpus=2))
    clock.t += 31
    p.resources_allocation()
    batch, share, reclaim = (p.state.pools[k] for k in ("batch", "share", "reclaim"))
    assert not batch & share and not (batch | share) & reclaim
    # idle CPUs beyond reclaim's 4 are apportioned by floor; the rounding rest stays in reclaim
    assert 4 <= len(reclaim) < 4 + 2
    assert len(batch) + len(share) + len(reclaim) == 14
    assert len(batch) > len(share)
    # over-commit: pools squeeze proportionally, reclaim falls back to overlap
    p.allocate(req(uid="c", cpus=20 - 6 + 0.5, pool="batch"))
    sizes = {k: len(v) for k, v in p.state.pools.items()}
    assert sizes["batch"] + sizes["share"] == 14 and sizes["reclaim"] == 4


def test_enable_reclaim_keeps_idle_in_reclaim():
    clock = Clock()
    p = make_policy(clock, enable_reclaim=True)
    p.allocate(req())
    clock.t += 31
    p.resources_allocation()
    assert len(p.state.pools["share"]) == 2 and len(p.state.pools["reclaim"]) == 12


def test_dedicated_cannot_starve_shared():
    clock = Clock()
    p = make_policy(clock)
    p.allocate(req(uid="s"))
    for n, uid in ((0, "d0"), (1, "d1"), (2, "d2")):
        p.allocate(req(uid=uid, qos="dedicated_cores", binding=True, exclusive=True, hint=(n,)))
    before = p.state
    with pytest.raises(PolicyError) as e:
        p.allocate(req(uid="d3", qos="dedicated_cores", binding=True, exclusive=True, hint=(3,)))
    assert e.value.code == "RESOURCE_EXHAUSTED" and p.state is before


def test_calculator_topology_packing():
    idx = TopoIndex(upstream_topology())
    # a whole socket when the request covers it
    assert take_by_topology(idx, C("0-15"), 8) == C("0-3,8-11")
    # whole cores before threads, partially used cores first for threads
    assert take_by_topology(idx, C("1,3-15"), 3, align_l3=False) == C("1,8-9")
    took, rest = take_by_numa_balance(idx, C("1,3-15"), 10)
    assert took == C("1,3-6,9,11-14") and rest == C("7-8,10,15")


def test_machine_state_from_pod_entries():
    clock = Clock()
    p = make_policy(clock)
    p.allocate(req(uid="s1"))
    p.allocate(req(uid="s2"))
    clock.t += 31
    p.resources_allocation()
    p.allocate(req(uid="r1", qos="reclaimed_cores"))
    ms = machine_state(p.idx, p.state, with_entries=True)
    share, reclaim = p.state.pools["share"], p.state.pools["reclaim"]
    for n, node in ms.items():
        numa = CPUSet(p.idx.numa_cpus[n])
        assert node.default_cpuset == numa and node.allocated_cpuset == CPUSet()
        assert node.pod_entries.get(("s1", "c1"), CPUSet()) == share & numa
        assert node.pod_entries.get(("r1", "c1"), CPUSet()) == reclaim & numa
    assert ms[0].pod_entries[("s1", "c1")] == share & C("0-1,8-9")
