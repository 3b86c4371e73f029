"""A dedicated Allocate or RemovePod costs the same whatever the number of pool
members (issue 24): the shared pool moves when a NUMA-bound container takes or
gives back its node, and its members name the pool instead of holding a copy
of its cpuset, so nothing is rewritten per member. Every reader still sees
each member's current cpuset: the entries, the checkpoint and its journal, the
enforcer's plan."""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as hst

from agent.contracts.cpu import AllocationInfo
from agent.cpu.checkpoint import PolicyCodec, decode, encode, encode_change
from agent.cpu.enforce import plan_cgroups
from agent.cpu.policy import DynamicPolicy
from agent.cpu.qos import RECLAIM_POOL
from agent.cpu.state import PMap
from agent.topology.model import synthetic

from .helpers import Clock, make_policy, req

TOPO = synthetic(sockets=2, numa_per_socket=4, cores_per_numa=4, threads_per_core=2)  # 64 cpus, 8 NUMA nodes


def _filled(n: int) -> tuple[DynamicPolicy, Clock]:
    """``n`` shared pods (a third in pool "batch", ramp-up over) and n/10 reclaimed, with sidecars."""
    clock = Clock()
    p = make_policy(clock, topo=TOPO)
    for i in range(n):
        p.allocate(req(uid=f"s{i}", cpus=0.01, pool="batch" if i % 3 == 0 else None))
        if i % 4 == 0:
            p.allocate(req(uid=f"s{i}", container="side", cpus=0, ctype="SIDECAR"))
    for i in range(n // 10):
        p.allocate(req(uid=f"r{i}", qos="reclaimed_cores", cpus=1))
    clock.t += 60
    p.complete_ramp_up()
    p.pod_running = lambda uid: True
    return p, clock


def _entry_copies(p: DynamicPolicy, uid: str) -> int:
    """AllocationInfo values built by one dedicated Allocate and its RemovePod."""
    calls = 0
    real_with, real_evolve = AllocationInfo.with_cpuset, AllocationInfo.evolve

    def with_cpuset(self, cpus):
        nonlocal calls
        calls += 1
        return real_with(self, cpus)

    def evolve(self, **kw):
        nonlocal calls
        calls += 1
        return real_evolve(self, **kw)

    with mock.patch.object(AllocationInfo, "with_cpuset", with_cpuset), \
            mock.patch.object(AllocationInfo, "evolve", evolve):
        p.allocate(req(uid=uid, qos="dedicated_cores", cpus=2, binding=True, hint=(3,)))
        assert p.remove_pod(uid)
    return calls


def test_dedicated_allocate_and_remove_touch_no_pool_member():
    small, _ = _filled(10)
    large, _ = _filled(600)
    pool_before = large.state.pools["share"]
    assert _entry_copies(small, "d") == _entry_copies(large, "d")
    assert large.state.pools["share"] == pool_before  # it moved and came back


def test_members_read_their_pools_current_cpuset():
    p, _ = _filled(30)
    records: list[bytes] = []
    last = [p.state]

    def journal(s):
        records.append(encode_change(last[0], s, p.last_change))
        last[0] = s

    p.listeners.append(journal)
    snapshot = encode(p.state)
    p.allocate(req(uid="d", qos="dedicated_cores", cpus=2, binding=True, hint=(3,)))
    st = p.state
    share, batch, reclaim = st.pools["share"], st.pools["batch"], st.pools[RECLAIM_POOL]
    assert not share & TOPO_NUMA3  # node 3 left the shared pools
    want = {"share": share, "batch": batch, RECLAIM_POOL: reclaim}
    for a in p.state.containers():
        if a.pod_uid != "d":
            assert a.cpuset == want[a.owner_pool_name], (a.pod_uid, a.container_name)
    for uid in ("s1", "s3", "s4", "r0"):
        a = p.container(uid, "c1")
        assert a.cpuset == want[a.owner_pool_name]
        assert p.placement(uid, "c1").cpus == a.cpuset
    assert p.container("s4", "side").cpuset == share  # a sidecar follows its main
    assert p.container("s0", "side").cpuset == batch
    # the checkpoint and the journal carry the cpusets the readers see
    assert decode(encode(st)).entries == st.entries
    codec = PolicyCodec()
    r, _ = codec.decode_snapshot(snapshot)
    for payload in records:
        r = codec.apply(r, payload)
    assert r.finish().entries == st.entries
    assert st == decode(encode(st))


def test_enforcement_resolves_members(tmp_path):
    p, _ = _filled(12)
    p.allocate(req(uid="d", qos="dedicated_cores", cpus=2, binding=True, hint=(3,)))
    for uid in ("s1", "s3", "r0"):
        p.set_cgroup_path(uid, "c1", f"kubepods/{uid}/c1")
    fs = mock.Mock()
    fs.cpuset_root = tmp_path
    plan = plan_cgroups(fs, p.state)
    st = p.state
    assert plan.targets == {
        "kubepods/s1/c1": st.pools["share"], "kubepods/s3/c1": st.pools["batch"],
        "kubepods/r0/c1": st.pools[RECLAIM_POOL],
    }


TOPO_NUMA3 = TOPO.cpus_of_numa(3)


@settings(max_examples=100, deadline=None)
@given(ops=hst.lists(hst.tuples(hst.booleans(), hst.integers(0, 60), hst.integers()), max_size=300))
def test_persistent_map_is_a_dict_whose_old_versions_never_change(ops):
    """``PMap`` (the states' pods, the index's member sets) against a dict: every
    version answers as the dict did when it was made, however many came after."""
    m: PMap[int, int] = PMap({-1: 0, -2: 0})
    ref = {-1: 0, -2: 0}
    versions = [(m, dict(ref))]
    for put, k, v in ops:
        if put:
            m, ref[k] = m.put(k, v), v
        else:
            m = m.drop(k)
            ref.pop(k, None)
        versions.append((m, dict(ref)))
    for got, want in versions:
        assert len(got) == len(want) and dict(got.items()) == want and set(got) == set(want)
        assert all((k in got) == (k in want) and got.get(k) == want.get(k) for k in range(-2, 61))
        assert got == want
