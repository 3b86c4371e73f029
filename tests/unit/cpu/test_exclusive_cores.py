"""Exclusive cores beside the shared pool (issue 23): ``dedicated_numa``.

Under ``"exclusive-cores"`` a NUMA-bound dedicated container's CPUs leave the
shared pools and the rest of its node stays shared (the kubelet static CPU
manager's, Slurm's and Nomad's rule); under ``"whole-node"`` (Katalyst's 14.4)
its whole node leaves them. The guard against starving shared containers holds
under both."""

from __future__ import annotations

import pytest

from agent.cpu.errors import PolicyError
from agent.cpu.policy import DynamicPolicy, PolicyOptions
from agent.cpu.qos import DEDICATED_OWNER, RECLAIM_POOL, RESERVE_POOL
from agent.cpu.state import validate_state
from agent.cpuset import CPUSet
from agent.topology.model import synthetic
from tests.unit.cpu.helpers import Clock, make_policy, req

C = CPUSet.parse
MODES = ("exclusive-cores", "whole-node")


def _two_shared_running(p, clock: Clock) -> None:
    """Two shared services that finished ramping up and sit in the share pool."""
    p.allocate(req(uid="s1", cpus=1))
    p.allocate(req(uid="s2", cpus=1))
    clock.t += 31
    p.resources_allocation()
    assert p.state.pools["share"]


def _shared_pool_cpus(p) -> CPUSet:
    return CPUSet.union_all(c for n, c in p.state.pools.items() if n not in (RESERVE_POOL, RECLAIM_POOL))


def test_policy_options_default_is_katalysts_rule():
    # the upstream fixtures' pool expectations depend on 14.4
    assert PolicyOptions().dedicated_numa == "whole-node"


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="dedicated_numa"):
        make_policy(dedicated_numa="half-node")


def test_exclusive_cores_keeps_rest_of_node_shared_on_two_numa_fixture():
    # 2 NUMA nodes of 2 cores x 2 threads: node 0 = 0-1,4-5, node 1 = 2-3,6-7
    topo = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)
    clock = Clock()
    p = make_policy(clock, topo=topo, reserved_count=0, reclaim_min=0, dedicated_numa="exclusive-cores")
    _two_shared_running(p, clock)
    r = p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=False, cpus=2, hint=(0,)))
    ded = r.allocation.cpuset
    assert len(ded) == 2 and ded <= C("0-1,4-5")
    # core alignment as today: two threads of one core
    assert len({p.idx.core_of[i].first for i in ded}) == 1
    share = p.state.pools["share"]
    # the rest of node 0 stays shared; no dedicated CPU is in any pool
    assert share == C("0-7") - ded
    for name, cpus in p.state.pools.items():
        assert not cpus & ded, f"pool {name} holds dedicated cpus {cpus & ded}"
    assert p.container("s1", "c1").cpuset == p.container("s2", "c1").cpuset == share
    validate_state(p.state)
    p.remove_pod("d")
    assert p.state.pools["share"] == C("0-7")


def test_whole_node_takes_the_node_on_two_numa_fixture():
    topo = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)
    clock = Clock()
    p = make_policy(clock, topo=topo, reserved_count=0, reclaim_min=0, dedicated_numa="whole-node")
    _two_shared_running(p, clock)
    p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=False, cpus=2, hint=(0,)))
    assert p.state.pools["share"] == C("2-3,6-7")


def _one_numa_two_cpus():
    """This VM's shape: one NUMA node, two cores of one thread."""
    return synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2, threads_per_core=1)


def test_one_numa_node_dedicated_beside_two_shared_services():
    clock = Clock()
    p = make_policy(clock, topo=_one_numa_two_cpus(), reserved_count=0, reclaim_min=2,
                    dedicated_numa="exclusive-cores")
    _two_shared_running(p, clock)
    r = p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=False, cpus=1, hint=(0,)))
    ded = r.allocation.cpuset
    assert len(ded) == 1 and r.allocation.owner_pool_name == DEDICATED_OWNER
    other = C("0-1") - ded
    assert p.state.pools["share"] == other
    assert p.container("s1", "c1").cpuset == p.container("s2", "c1").cpuset == other
    validate_state(p.state)


def test_one_numa_node_whole_node_refuses_as_katalyst():
    clock = Clock()
    p = make_policy(clock, topo=_one_numa_two_cpus(), reserved_count=0, reclaim_min=2, dedicated_numa="whole-node")
    _two_shared_running(p, clock)
    before = p.state
    with pytest.raises(PolicyError) as e:
        p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=False, cpus=1, hint=(0,)))
    assert e.value.code == "RESOURCE_EXHAUSTED" and e.value.reason == "no_shared_cpus"
    assert p.state is before


@pytest.mark.parametrize("mode", MODES)
def test_guard_dedicated_cannot_take_the_last_shared_cpu(mode):
    clock = Clock()
    p = make_policy(clock, topo=_one_numa_two_cpus(), reserved_count=0, reclaim_min=2, dedicated_numa=mode)
    _two_shared_running(p, clock)
    before = p.state
    with pytest.raises(PolicyError) as e:
        p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=False, cpus=2, hint=(0,)))
    assert e.value.code == "RESOURCE_EXHAUSTED" and e.value.reason == "no_shared_cpus"
    assert p.state is before


def test_exclusive_cores_ramp_up_and_new_shared_avoid_dedicated_cpus():
    clock = Clock()
    p = make_policy(clock, topo=_one_numa_two_cpus(), reserved_count=0, reclaim_min=2,
                    dedicated_numa="exclusive-cores")
    ded = p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=False, cpus=1, hint=(0,)))
    r = p.allocate(req(uid="s", cpus=1))
    assert r.allocation.ramp_up and r.allocation.cpuset == C("0-1") - ded.allocation.cpuset
    assert p.shared_cpus() == C("0-1") - ded.allocation.cpuset


def test_exclusive_cores_shared_refused_when_every_cpu_is_dedicated():
    p = make_policy(topo=_one_numa_two_cpus(), reserved_count=0, reclaim_min=2, dedicated_numa="exclusive-cores")
    p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=False, cpus=2, hint=(0,)))
    with pytest.raises(PolicyError) as e:
        p.allocate(req(uid="s", cpus=1))
    assert e.value.reason == "no_shared_cpus" and "dedicated" in e.value.message


def test_switching_to_whole_node_with_shared_pods_on_a_bound_node_stops_start():
    clock = Clock()
    topo = _one_numa_two_cpus()
    p = make_policy(clock, topo=topo, reserved_count=0, reclaim_min=2, dedicated_numa="exclusive-cores")
    _two_shared_running(p, clock)
    p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=False, cpus=1, hint=(0,)))
    with pytest.raises(ValueError, match='dedicated_numa = "exclusive-cores"'):
        DynamicPolicy(topo, PolicyOptions(reserved_count=0, reclaim_min=2, dedicated_numa="whole-node"),
                      state=p.state)
