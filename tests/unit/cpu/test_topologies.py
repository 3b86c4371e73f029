"""Policy invariants on larger synthetic shapes and real machines' topologies
(hwloc snapshots read through agent.topology.sysfs), plus a randomized
sequence of operations checked after every step."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.cpu.calculator import TopoIndex, take_by_topology
from agent.cpu.errors import PolicyError
from agent.cpu.policy import DynamicPolicy, PolicyOptions
from agent.cpu.qos import DEDICATED, RECLAIMED, SHARED
from agent.cpu.state import machine_state
from agent.cpuset import CPUSet
from agent.topology.model import synthetic
from agent.topology.sysfs import read_topology

from .helpers import Clock, req

FIXTURES = [
    "16amd64-8n2c",
    "64fake-4n2s2ca2c2t",
    pytest.param("32intel64-2p8co2t+8ve", marks=pytest.mark.slow),
    # big snapshots: extraction alone takes seconds on a loaded 2-core box
    pytest.param("128arm-2pa2n8cluster4co", marks=pytest.mark.slow),
    pytest.param("256ia64-64n2s2c", marks=pytest.mark.slow),
]


def check_invariants(p: DynamicPolicy) -> None:
    st = p.state
    idx = p.idx
    ded = [a for a in st.containers() if a.qos_level == DEDICATED and not a.is_sidecar]
    seen: set[int] = set()
    for a in ded:
        assert not set(a.cpuset) & seen, "dedicated cpusets overlap"
        seen |= set(a.cpuset)
        assert not a.cpuset & p.reserved
        assert len(a.cpuset) >= int(a.request_quantity + 0.999999)
    bound = {idx.numa_of[i] for a in ded for i in a.cpuset}
    bound_cpus = CPUSet(frozenset().union(*(idx.numa_cpus[n] for n in bound)) if bound else ())
    for name, cpus in st.pools.items():
        if name == "reserve":
            assert cpus == p.reserved
            continue
        assert cpus, f"pool {name} empty"
        assert not cpus & p.reserved
        if name != "reclaim":
            assert not cpus & bound_cpus, f"pool {name} on a dedicated NUMA node"
    shared_pools = [c for n, c in st.pools.items() if n not in ("reserve", "reclaim")]
    for i, a in enumerate(shared_pools):
        for b in shared_pools[i + 1 :]:
            assert not a & b
    for a in st.containers():
        if a.qos_level == SHARED and not a.ramp_up:
            assert a.cpuset == st.pools[a.owner_pool_name]
        if a.qos_level == RECLAIMED:
            assert a.cpuset == st.pools["reclaim"]
        assert a.cpuset, f"{a.pod_uid} holds no cpu"


def fixture_topology(hwloc_extract, name):
    d = hwloc_extract(name)
    return read_topology(str(d / "sys"), str(d / "proc"))


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_topologies(hwloc_extract, name):
    topo = fixture_topology(hwloc_extract, name)
    clock = Clock()
    p = DynamicPolicy(topo, PolicyOptions(reserved_count=2), clock=clock)
    idx = p.idx
    # reserved: lowest CPU of the first two NUMA nodes
    assert p.reserved == CPUSet(min(idx.numa_cpus[n]) for n in idx.numa_ids[:2])
    last = idx.numa_ids[-1]
    size = len(idx.numa_cpus[last] - frozenset(p.reserved))
    h = p.get_topology_hints(req(uid="d", qos="dedicated_cores", binding=True, exclusive=True, cpus=size))
    preferred = [x.nodes for x in h.hints if x.preferred]
    assert (last,) in preferred and all(len(n) == 1 for n in preferred)
    r = p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=True, cpus=size, hint=(last,)))
    assert r.allocation.cpuset == CPUSet(idx.numa_cpus[last]) - p.reserved
    p.allocate(req(uid="s", cpus=3))
    p.allocate(req(uid="r", qos="reclaimed_cores", cpus=1))
    clock.t += 31
    p.resources_allocation()
    check_invariants(p)
    if len(idx.numa_ids) > 3:
        # a non-exclusive request lands inside one node, packed by core
        r = p.allocate(
            req(uid="n", qos="dedicated_cores", binding=True, exclusive=False, cpus=2, hint=(idx.numa_ids[2],))
        )
        assert set(idx.assignments(r.allocation.cpuset)) == {idx.numa_ids[2]}
    check_invariants(p)


@pytest.mark.slow
def test_large_numa_hint_walk_is_bounded(hwloc_extract):
    topo = fixture_topology(hwloc_extract, "256ia64-64n2s2c")
    p = DynamicPolicy(topo, PolicyOptions())
    h = p.get_topology_hints(req(qos="dedicated_cores", binding=True, exclusive=True, cpus=6))
    sizes = {len(x.nodes) for x in h.hints}
    assert sizes == {2, 3} and all(x.preferred == (len(x.nodes) == 2) for x in h.hints)


def test_256_cpu_8_numa_shape():
    topo = synthetic(sockets=2, numa_per_socket=4, cores_per_numa=16, threads_per_core=2)
    p = DynamicPolicy(topo, PolicyOptions(reserved_count=8), clock=Clock())
    assert len(p.reserved) == 8 and len({p.idx.numa_of[i] for i in p.reserved}) == 8
    r = p.allocate(req(qos="dedicated_cores", binding=True, exclusive=False, cpus=8, hint=(5,)))
    # whole cores: 4 cores x 2 threads, all on NUMA 5
    cores = {p.idx.core_of[i] for i in r.allocation.cpuset}
    assert len(cores) == 4 and all(k.cpus <= frozenset(r.allocation.cpuset) for k in cores)
    check_invariants(p)


def test_l3_alignment_keeps_request_in_one_llc():
    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=8, threads_per_core=1, l3_per_numa=False)
    # split the socket's L3 into two 4-core halves (a 2-CCX part)
    from dataclasses import replace

    from agent.topology.model import Cache

    caches = tuple(c for c in topo.caches if c.level < 3) + (
        Cache(3, "Unified", 16 << 20, CPUSet.parse("0-3")),
        Cache(3, "Unified", 16 << 20, CPUSet.parse("4-7")),
    )
    topo = replace(topo, caches=caches)
    idx = TopoIndex(topo)
    avail = CPUSet.parse("1-2,4-7")
    assert take_by_topology(idx, avail, 3, align_l3=True) == CPUSet.parse("4-6")
    assert take_by_topology(idx, avail, 3, align_l3=False) == CPUSet.parse("1-2,4")
    assert take_by_topology(idx, avail, 2, align_l3=True) == CPUSet.parse("1-2")


OPS = st.lists(
    st.tuples(
        st.sampled_from(["shared", "reclaimed", "ded_ex", "ded", "remove", "tick", "pool"]),
        st.integers(0, 7),
        st.integers(1, 9),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_sequences_keep_invariants(ops):
    topo = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=4, threads_per_core=2)
    clock = Clock()
    p = DynamicPolicy(topo, PolicyOptions(reserved_count=2, transition_period_s=5), clock=clock)
    p.pod_running = lambda uid: True
    for op, pod, n in ops:
        uid = f"p{pod}"
        before = p.state
        try:
            if op == "shared":
                p.allocate(req(uid=uid, cpus=n / 2))
            elif op == "pool":
                p.allocate(req(uid=uid, cpus=n / 3, pool="batch"))
            elif op == "reclaimed":
                p.allocate(req(uid=uid, qos="reclaimed_cores", cpus=n))
            elif op in ("ded", "ded_ex"):
                ex = op == "ded_ex"
                h = p.get_topology_hints(req(uid=uid, qos="dedicated_cores", binding=True, exclusive=ex, cpus=n))
                p.allocate(req(uid=uid, qos="dedicated_cores", binding=True, exclusive=ex, cpus=n, hint=h.hints[0].nodes))
            elif op == "remove":
                p.remove_pod(uid)
            else:
                clock.t += 6
                p.resources_allocation()
        except PolicyError as e:
            assert p.state is before, f"{op} failed ({e}) but changed state"
            assert e.code in ("RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "FAILED_PRECONDITION")
        check_invariants(p)
        ms = machine_state(p.idx, p.state)
        for n, node in ms.items():
            assert node.default_cpuset | node.allocated_cpuset == CPUSet(p.idx.numa_cpus[n])
