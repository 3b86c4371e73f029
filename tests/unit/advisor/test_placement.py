"""The advisor's NUMA placement of the shared pool (agent/advisor/placement.py): table tests of
the pure choice on multi-NUMA topologies, the policy's checks of a placement it is handed
(``DynamicPolicy.resize_shared(size, cpus)``), and the advisor component with the policy on a
2-node machine: the grown pool lands on the node where the shared pods' memory and delay are,
never on a reserved or dedicated CPU, with the placement and its reason in the record."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent.advisor import component as comp_mod
from agent.advisor.component import AdvisorComponent
from agent.advisor.config import ADVISOR_SECTION
from agent.advisor.placement import Machine, numa_pressure, place
from agent.advisor.record import format_decision
from agent.cgroups.detect import CgroupLayout
from agent.config import section_defaults
from agent.contracts import CPU_POLICY, CPU_SHARED_POOL, PRESSURE, DaemonContext
from agent.cpu.checkpoint import encode_change
from agent.cpu.durable import DurablePolicy
from agent.cpu.errors import PolicyError
from agent.cpu.qos import DEDICATED_OWNER, RECLAIM_POOL, RESERVE_POOL
from agent.cpu.state import validate_state
from agent.cpuset import CPUSet
from agent.tasks import cancel_and_wait
from agent.topology.model import synthetic
from agent.topology.sysfs import read_topology
from tests.unit.advisor.test_component import SUBTREE, FakePressure
from tests.unit.cpu.helpers import Clock, make_policy, req

C = CPUSet.parse
#: 2 nodes of 4 single-thread cores, one L3 each: node 0 = 0-3, node 1 = 4-7
TWO = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=4, threads_per_core=1)
#: the upstream fixture: 4 nodes of 2 cores x 2 threads; node n = {2n, 2n+1, 2n+8, 2n+9}, siblings k, k+8
FOUR = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)


@pytest.mark.parametrize("topo, current, room, size, pressure, want, why", [
    # grow on the pressured node, though the pool is elsewhere
    (TWO, "0", "0-7", 3, {0: 0.0, 1: 0.5}, "0,4-5", "node(s) 1 (shared pressure highest on node 1"),
    # no pressure anywhere: beside the pool, on as few nodes as fit
    (TWO, "0", "0-7", 4, {0: 0.0, 1: 0.0}, "0-3", "node(s) 0 (no node under more shared pressure"),
    # the pressured node has room for 2 only (a dedicated pod holds 6-7): the rest spills next door
    (TWO, "0", "0-5", 4, {0: 0.0, 1: 0.9}, "0-1,4-5", "node(s) 1,0"),
    # more than the room: all of it
    (TWO, "0", "0-2", 6, {}, "0-2", "grown"),
    # hyperthreads: the sibling of a pool cpu first (a whole core), then a whole free core of the same node
    (FOUR, "2", "0-7,9-15", 3, {1: 0.3}, "2-3,10", "node(s) 1"),
    (FOUR, "2", "0-7,9-15", 4, {1: 0.3}, "2-3,10-11", "node(s) 1"),
    # pressure on node 3 (its memory): the pool grows there, whole core first
    (FOUR, "2,10", "0-7,9-15", 4, {3: 0.2, 1: 0.1}, "2,6,10,14", "node(s) 3"),
    # shrink: from the node with the least pressure; lone threads before whole cores
    (FOUR, "2-3,10-11,6,14", "0-15", 4, {1: 0.0, 3: 0.4}, "2,6,10,14", "node(s) 1"),
    (FOUR, "2,10-11,6,14", "0-15", 4, {1: 0.0, 3: 0.4}, "2,6,10,14", "node(s) 1"),
    # shrink between equals: the node with fewer pool cpus goes first (the pool consolidates)
    (TWO, "0-2,4", "0-7", 3, {}, "0-2", "node(s) 1"),
    # cpus the pool may no longer hold are dropped first, then the size is met
    (TWO, "0-1,6", "0-5", 3, {1: 0.2}, "0-1,4", "6 no longer the pool's"),
    # same size, nothing moves
    (TWO, "4-5", "0-7", 2, {0: 1.0}, "4-5", "kept"),
])
def test_place(topo, current, room, size, pressure, want, why):
    m = Machine.of(topo)
    p = place(m, C(current), C(room), size, pressure)
    assert p.cpus == C(want), p.reason
    assert p.cpus <= C(room) and len(p.cpus) == min(size, len(C(room)))
    assert p.add == p.cpus - C(current) and p.remove == C(current) - p.cpus
    assert why in p.reason
    rec = p.record(m)
    assert rec["cpus"] == want and rec["reason"] == p.reason


#: a real machine's tree (hwloc's test-suite): 2 packages, 16 NUMA nodes of 2 cores x 2 threads,
#: each L3 shared by two nodes
SNAPSHOT = "fakecpuid1f-64intel64-2p4d2n2c2t"


def test_place_on_a_real_snapshot_fills_the_pressured_node_then_its_l3_neighbour(hwloc_extract):
    root = hwloc_extract(SNAPSHOT)
    topo = read_topology(root / "sys", root / "proc", self_cgroup=True)
    m = Machine.of(topo)
    nodes = m.nodes
    assert len(nodes) == 16
    cpus_of = {n: CPUSet(i for i, k in m.numa_of.items() if k == n) for n in nodes}
    hot = nodes[5]
    llc = {m.llc_of[i] for i in cpus_of[hot]}
    (mate,) = [n for n in nodes if n != hot and {m.llc_of[i] for i in cpus_of[n]} & llc]
    start = CPUSet(m.siblings[min(cpus_of[hot])])  # one core on the pressured node
    p = place(m, start, topo.online, len(cpus_of[hot]) + 2, {hot: 0.5})
    assert cpus_of[hot] <= p.cpus
    extra = p.cpus - cpus_of[hot]
    assert extra <= cpus_of[mate] and len(extra) == 2, (p.cpus, mate)  # the L3 neighbour, not node 0
    assert CPUSet(m.siblings[min(extra)]) == extra  # a whole core
    # a pool already on a far node spills there instead: as few nodes as fit comes before the L3
    far = CPUSet(m.siblings[min(cpus_of[nodes[9]])])
    q = place(m, far, topo.online, len(far) + len(cpus_of[hot]) + 2, {hot: 0.5})
    assert q.cpus - cpus_of[hot] <= cpus_of[nodes[9]], q.cpus
    # the policy on the same tree takes the placement as given
    clock = Clock()
    pol = make_policy(clock, topo=topo, reserved_count=0, reclaim_min=2)
    _shared(pol, clock)
    assert pol.resize_shared(len(p.cpus), p.cpus) is True
    assert pol.state.pools["share"] == p.cpus
    validate_state(pol.state)


def test_numa_pressure_counts_a_pod_on_the_nodes_of_its_memory():
    m = Machine.of(FOUR)
    got = numa_pressure(m, [(0.4, C("3")), (0.2, C("0-1")), (0.4, None), (0.0, C("2"))])
    assert got == pytest.approx({0: 0.2, 1: 0.2, 2: 0.1, 3: 0.5})


# -- the policy's side: a placement is checked and kept -----------------------------------------

def _shared(p, clock: Clock, uid: str = "s0", cpus: float = 1) -> None:
    p.allocate(req(uid=uid, cpus=cpus))
    clock.t += 31
    p.resources_allocation()


def test_the_policy_carves_the_pool_from_the_placement_and_keeps_it():
    clock = Clock()
    p = make_policy(clock, topo=TWO, reserved_count=0, reclaim_min=2)
    _shared(p, clock)
    before = p.state
    seen = []
    p.listeners.append(seen.append)
    assert p.resize_shared(3, C("4-6")) is True
    assert p.state.pools["share"] == C("4-6")
    assert len(seen) == 1 and b'"pools"' in encode_change(before, p.state, p.last_change)  # journaled
    assert p.resize_shared(3, C("4-6")) is False and len(seen) == 1  # the same again: nothing to record
    assert not p.state.pools["share"] & p.state.pools[RECLAIM_POOL]
    validate_state(p.state)
    _shared(p, clock, uid="s1")  # a later re-size (another shared pod) keeps the placement
    assert p.state.pools["share"] == C("4-6")
    _shared(p, clock, uid="s2", cpus=2)  # requests now need 4: topped up beside it
    assert C("4-6") < p.state.pools["share"] and len(p.state.pools["share"]) == 4
    validate_state(p.state)


def test_a_placement_on_reserved_dedicated_or_another_pools_cpus_is_refused():
    clock = Clock()
    p = make_policy(clock, topo=TWO, reserved_count=1, reclaim_min=1, dedicated_numa="exclusive-cores")
    _shared(p, clock)
    p.allocate(req(uid="other", cpus=1, pool="batch"))
    clock.t += 31
    p.resources_allocation()
    r = p.allocate(req(uid="d", qos="dedicated_cores", binding=True, exclusive=False, cpus=1, hint=(1,)))
    ded = r.allocation.cpuset
    assert r.allocation.owner_pool_name == DEDICATED_OWNER
    batch = p.state.pools["batch"]
    room = p.shared_room()
    assert not room & (p.reserved | ded | batch)
    before = p.state
    for bad in (p.reserved, ded, batch, CPUSet()):
        with pytest.raises(PolicyError) as e:
            p.resize_shared(2, bad | (room if bad else CPUSet()))
        assert e.value.reason == "bad_cpus"
        assert p.state is before
    assert p.resize_shared(2, CPUSet(sorted(room)[-2:])) is True
    validate_state(p.state)


# -- the advisor with the policy on a 2-node machine -----------------------------------------------

class TwoNode:
    """A 2-node policy (reserved cpu 0, a dedicated pod on a node 1 cpu under exclusive-cores), two shared
    pods whose memory is on node 0 (quiet) and node 1 (waiting), two reclaimed hogs."""

    def __init__(self, tmp) -> None:
        self.tmp = tmp
        self.cg = tmp / "cgroup"
        self.clock = Clock(100.0)
        pclock = Clock()
        self.policy = make_policy(pclock, topo=TWO, reserved_list=C("0"), reclaim_min=2,
                                  dedicated_numa="exclusive-cores")
        self.durable = DurablePolicy(self.policy, None)
        self.pressure = FakePressure()
        r = self.policy.allocate(req(uid="ded", qos="dedicated_cores", binding=True, exclusive=False, cpus=1,
                                     hint=(1,)))
        self.ded = r.allocation.cpuset
        for uid, mems in (("quiet", "0"), ("busy", "1")):
            self.policy.allocate(req(uid=uid, cpus=0.5))
            self.policy.set_cgroup_path(uid, "c1", f"{SUBTREE}/pod{uid}/c1")
            d = self.cg / SUBTREE.lstrip("/") / f"pod{uid}" / "c1"
            d.mkdir(parents=True)
            (d / "cpu.stat").write_text("usage_usec 0\n")
            (d / "cpuset.mems").write_text(mems + "\n")
        pclock.t += 31
        self.policy.resources_allocation()
        for i in range(2):
            self.policy.allocate(req(uid=f"hog{i}", qos="reclaimed_cores", cpus=0.1))
            self.policy.set_cgroup_path(f"hog{i}", "c1", f"{SUBTREE}/podhog{i}/c1")
            d = self.cg / SUBTREE.lstrip("/") / f"podhog{i}"
            (d / "c1").mkdir(parents=True)
            (d / "cpu.max").write_text("max 100000\n")
            for x in (d, d / "c1"):
                (x / "cpu.stat").write_text("usage_usec 0\n")

    def ctx(self) -> DaemonContext:
        cfg = section_defaults().replace("advisor", enabled=True)
        ctx = DaemonContext(cfg, self.tmp / "root", TWO)
        ctx.publish(CPU_POLICY, self.durable)
        ctx.publish(CPU_SHARED_POOL, self.durable)
        ctx.publish(PRESSURE, self.pressure)  # type: ignore[arg-type]
        return ctx

    def invariants(self) -> None:
        st = self.policy.state
        validate_state(st)
        share = st.pools["share"]
        assert not share & self.policy.reserved and not share & self.ded, share
        assert not share & st.pools[RESERVE_POOL]
        for uid in ("quiet", "busy"):
            assert self.policy.container(uid, "c1").cpuset == share


def test_the_grown_pool_lands_on_the_pressured_node_and_the_record_says_why(tmp_path, monkeypatch):
    e = TwoNode(tmp_path)
    monkeypatch.setattr(comp_mod, "detect", lambda root: CgroupLayout("v2", e.cg, frozenset({"cpu", "cpuset"})))

    async def scenario():
        ctx = e.ctx()
        c = AdvisorComponent(ctx.config[ADVISOR_SECTION], clock=e.clock)
        await c.start(ctx)
        await cancel_and_wait(c._task)
        first = None
        grown = []
        for _ in range(10):
            e.pressure.grow(("busy", "c1"), 13, 100)  # ~8 ms waits, memory on node 1
            e.pressure.grow(("quiet", "c1"), 3, 100)  # ~8 us
            e.clock.t += 1.0
            d = await c.tick()
            e.invariants()
            first = first or e.policy.state.pools["share"]  # the advisor's first reading: pools it sizes
            if d.action == "grow":
                grown.append(e.policy.state.pools["share"])
        assert grown, "the advisor never grew the pool"
        assert first is not None and len(first) == 1 and first <= C("1-3"), first  # round-robin put it on node 0
        node1 = C("4-7") - e.ded
        assert len(e.ded) == 1 and e.ded <= C("4-7")
        prev = first
        for pool in grown:  # each step on node 1 while it has room there, only then next door
            added = pool - prev
            assert added <= node1 if not node1 <= prev else added <= C("1-3"), (first, grown)
            prev = pool
        assert node1 <= grown[-1], grown
        recs = [json.loads(x) for x in (tmp_path / "root" / "advisor" / "decisions.jsonl").read_text().splitlines()]
        g = [r for r in recs if r["action"] == "grow"]
        assert g and all("placement" in r for r in g)
        pl = g[0]["placement"]
        assert "shared pressure highest on node 1" in pl["reason"] and pl["pressure"]["1"] > pl["pressure"]["0"]
        assert C(pl["add"]) <= node1
        line = format_decision(g[0])  # what `hwagent explain` shows of the change
        assert f"cpus {pl['cpus']}: grown on the NUMA node(s) 1" in line, line

        # calm: the pool shrinks, node 0 (its pods wait least) giving back first
        shrunk = []
        for _ in range(300):
            e.pressure.grow(("busy", "c1"), 3, 100)
            e.pressure.grow(("quiet", "c1"), 0, 100)
            e.clock.t += 1.0
            before = e.policy.state.pools["share"]
            d = await c.tick()
            e.invariants()
            if d.action == "shrink":
                after = e.policy.state.pools["share"]
                assert after < before and len(before - after) == 1, (before, after)
                gone = before - after
                assert gone <= C("1-3") if before & C("1-3") else gone <= node1, (before, after)
                shrunk.append(after)
            if len(e.policy.state.pools["share"]) == 1:
                break
        assert shrunk and not shrunk[-1] & C("1-3"), shrunk  # node 0 went first: what is left is on node 1
        kept = e.policy.state.pools["share"]
        await c.stop()

        # a restart places the pool where the checkpoint has it: nothing moves
        c2 = AdvisorComponent(ctx.config[ADVISOR_SECTION], clock=e.clock)
        await c2.start(ctx)
        await cancel_and_wait(c2._task)
        e.clock.t += 1.0
        await c2.tick()
        assert e.policy.state.pools["share"] == kept and c2.placement is not None and not c2.placement.add
        await c2.stop()

    asyncio.run(scenario())
