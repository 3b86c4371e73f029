"""The reclaim pool under ``dedicated_numa = "exclusive-cores"`` (issue 23): never a dedicated CPU.

Upstream tops a small reclaim pool up from any CPU but the reserved ones, the
dedicated ones included (seen on a 2-CPU machine: ``reclaim=0-1`` beside a
dedicated pod on 0), so a reclaimed pod shared a pinned job's core. Under
exclusive-cores the pool is topped up from the shared CPUs only; when dedicated
pods hold every unreserved CPU it is empty, and a reclaimed pod is refused (as a
shared one is) rather than run on a dedicated core or on the reserved CPUs
(docs/cpu-policy.md).
Whole-node keeps upstream's rule (Katalyst fidelity)."""

from __future__ import annotations

import pytest

from agent.cpu.errors import PolicyError
from agent.cpu.qos import RECLAIM_POOL
from agent.cpu.state import validate_state
from agent.cpuset import CPUSet
from agent.topology.model import synthetic
from tests.unit.cpu.helpers import make_policy, req

C = CPUSet.parse


def _cpus(n: int):
    return synthetic(sockets=1, numa_per_socket=1, cores_per_numa=n, threads_per_core=1)


def _dedicated(p, uid: str, cpus: int):
    return p.allocate(req(uid=uid, qos="dedicated_cores", binding=True, exclusive=False, cpus=cpus, hint=(0,)))


def test_reclaim_never_spills_onto_a_dedicated_cpu():
    # this machine's shape: 2 CPUs, none reserved, reclaim_min 2 ("auto" on 2 CPUs)
    p = make_policy(topo=_cpus(2), reserved_count=0, reclaim_min=2, dedicated_numa="exclusive-cores")
    ded = _dedicated(p, "d", 1).allocation.cpuset
    assert p.state.pools[RECLAIM_POOL] == C("0-1") - ded
    r = p.allocate(req(uid="r", qos="reclaimed_cores", cpus=1))
    assert not r.allocation.cpuset & ded and r.allocation.cpuset == C("0-1") - ded
    validate_state(p.state)


def test_every_unreserved_cpu_dedicated_leaves_reclaimed_pods_nothing_not_the_reserved_cpus():
    p = make_policy(topo=_cpus(4), reserved_count=1, reclaim_min=2, dedicated_numa="exclusive-cores")
    assert len(p.reserved) == 1
    ded = _dedicated(p, "d", 3).allocation.cpuset
    assert ded == C("0-3") - p.reserved
    assert not p.state.pools[RECLAIM_POOL], "the reserved cpus are the system's, never a pool's"
    with pytest.raises(PolicyError) as e:
        p.allocate(req(uid="r", qos="reclaimed_cores", cpus=1))
    assert e.value.reason == "no_reclaim_cpus"
    validate_state(p.state)
    p.remove_pod("d")
    assert p.state.pools[RECLAIM_POOL] == C("0-3") - p.reserved


def test_with_no_cpu_left_a_reclaimed_pod_is_refused_and_nothing_changes():
    p = make_policy(topo=_cpus(2), reserved_count=0, reclaim_min=2, dedicated_numa="exclusive-cores")
    _dedicated(p, "d", 2)
    assert not p.state.pools[RECLAIM_POOL]
    before = p.state
    with pytest.raises(PolicyError) as e:
        p.allocate(req(uid="r", qos="reclaimed_cores", cpus=1))
    assert e.value.code == "RESOURCE_EXHAUSTED" and e.value.reason == "no_reclaim_cpus"
    assert "dedicated pods hold every unreserved cpu" in e.value.message and "stop a dedicated pod" in e.value.message
    assert p.state is before


def test_a_dedicated_pod_cannot_take_the_last_cpu_of_running_reclaimed_pods():
    p = make_policy(topo=_cpus(2), reserved_count=0, reclaim_min=2, dedicated_numa="exclusive-cores")
    p.allocate(req(uid="r", qos="reclaimed_cores", cpus=1))
    _dedicated(p, "d1", 1)
    before = p.state
    with pytest.raises(PolicyError) as e:
        _dedicated(p, "d2", 1)
    assert e.value.reason == "no_reclaim_cpus"
    assert p.state is before


def test_whole_node_keeps_upstreams_fallback():
    # Katalyst tops reclaim up from any unreserved CPU: kept for fidelity under whole-node
    p = make_policy(topo=synthetic(sockets=1, numa_per_socket=2, cores_per_numa=1, threads_per_core=1),
                    reserved_count=0, reclaim_min=2, dedicated_numa="whole-node")
    ded = _dedicated(p, "d", 1).allocation.cpuset
    assert p.state.pools[RECLAIM_POOL] & ded
