"""The advisor's size of the shared pool (``DynamicPolicy.resize_shared``): the pool grows out
of the reclaim pool, never below requests, never onto reserved or dedicated CPUs, later
re-sizes keep it, and every change is a committed, journaled one."""

from __future__ import annotations

import pytest

from agent.cpu.checkpoint import encode_change
from agent.cpu.errors import PolicyError
from agent.cpu.qos import DEDICATED_OWNER, RECLAIM_POOL, RESERVE_POOL
from agent.cpu.state import validate_state
from agent.cpuset import CPUSet
from agent.topology.model import synthetic
from tests.unit.cpu.helpers import Clock, make_policy, req

C = CPUSet.parse


def _running_shared(p, clock: Clock, n: int = 1, cpus: float = 1) -> None:
    for i in range(n):
        p.allocate(req(uid=f"s{i}", cpus=cpus))
    clock.t += 31
    p.resources_allocation()
    assert p.state.pools["share"]


def _non_reclaim(p) -> dict[str, CPUSet]:
    return {k: v for k, v in p.state.pools.items() if k not in (RECLAIM_POOL, RESERVE_POOL)}


def test_grow_takes_from_reclaim_and_shrink_gives_back():
    clock = Clock()
    p = make_policy(clock, reserved_count=2, reclaim_min=4, enable_reclaim=True)  # 16 cpus, 2 reserved
    _running_shared(p, clock)
    lo, hi = p.shared_bounds()
    assert lo == 1 and hi == 14
    assert len(p.state.pools["share"]) == 1
    seen = []
    p.listeners.append(seen.append)
    before = p.state
    assert p.resize_shared(6) is True
    share = p.state.pools["share"]
    assert len(share) == 6 and not share & p.reserved
    assert not share & p.state.pools[RECLAIM_POOL]  # 8 cpus left over: reclaim needs no overlap
    assert p.container("s0", "c1").cpuset == share
    assert len(seen) == 1 and p.last_change.adjusted
    assert b'"pools"' in encode_change(before, p.state, p.last_change)  # the journal record holds the re-size
    validate_state(p.state)
    # a later re-size (another shared pod) keeps the advisor's size
    p.allocate(req(uid="late", cpus=1))
    clock.t += 31
    p.resources_allocation()
    assert len(p.state.pools["share"]) == 6
    assert p.resize_shared(None) is True
    assert len(p.state.pools["share"]) == 2  # back to requests (two 1-cpu pods)


def test_never_below_requests_and_never_onto_dedicated_cpus():
    clock = Clock()
    p = make_policy(clock, reserved_count=0, reclaim_min=0, enable_reclaim=True, dedicated_numa="exclusive-cores")
    _running_shared(p, clock, n=3, cpus=1)
    assert p.resize_shared(1) is False  # requests need 3: nothing moves
    assert len(p.state.pools["share"]) == 3
    r = p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=False, cpus=2, hint=(0,)))
    ded = r.allocation.cpuset
    assert r.allocation.owner_pool_name == DEDICATED_OWNER
    assert p.resize_shared(100) is True
    share = p.state.pools["share"]
    assert not share & ded and len(share) == 16 - 2 == p.shared_bounds()[1]
    validate_state(p.state)


def test_a_bad_size_is_refused_and_changes_nothing():
    clock = Clock()
    p = make_policy(clock)
    _running_shared(p, clock)
    before = p.state
    for bad in (0, -1, 1.5):
        with pytest.raises(PolicyError) as e:
            p.resize_shared(bad)  # type: ignore[arg-type]
        assert e.value.reason == "bad_size"
    assert p.state is before


def test_no_shared_pod_no_pool_to_size():
    p = make_policy(Clock())
    assert p.shared_bounds() == (0, 0)
    p.resize_shared(4)
    assert "share" not in _non_reclaim(p)
    validate_state(p.state)


def test_once_the_advisor_sizes_the_pools_idle_cpus_stay_in_reclaim():
    """Upstream's enable_reclaim = false hands every idle cpu beyond reclaim_min to the shared
    pools (share = 12 for a 1-cpu request here), which would leave the advisor nothing to give
    reclaimed pods; advised, the shared pool is what its requests (or the advisor) say."""
    clock = Clock()
    p = make_policy(clock, reserved_count=0, reclaim_min=4)
    _running_shared(p, clock, cpus=1)
    assert len(p.state.pools["share"]) == 12
    p.resize_shared(None)
    assert len(p.state.pools["share"]) == 1 and len(p.state.pools[RECLAIM_POOL]) == 15
    p.resize_shared(3)
    assert len(p.state.pools["share"]) == 3 and not p.state.pools["share"] & p.state.pools[RECLAIM_POOL]
    validate_state(p.state)


def test_on_a_two_cpu_box_the_reclaim_minimum_still_overlaps_the_shared_pool():
    """reclaim_min = 2 on 2 cpus: the reclaim pool keeps upstream's overlap (cpu.idle and the
    advisor's quota protect the shared pod there), whatever size the advisor sets."""
    clock = Clock()
    p = make_policy(clock, topo=synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2, threads_per_core=1),
                    reserved_count=0, reclaim_min=2)
    _running_shared(p, clock, cpus=0.1)
    p.resize_shared(None)
    assert len(p.state.pools["share"]) == 1 and p.state.pools[RECLAIM_POOL] == C("0-1")
    p.resize_shared(2)
    assert p.state.pools["share"] == C("0-1") == p.state.pools[RECLAIM_POOL]
    validate_state(p.state)
