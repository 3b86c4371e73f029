"""The incremental pool adjustment (``StateIndex``; members follow their pool by
reference and resolve when read) against a straightforward
recomputation that walks every container on every call, as the policy did
before the index existed. Random call sequences on a small multi-NUMA machine
must give identical results, states, encodings and a consistent index."""

from __future__ import annotations

import json
import math
from contextlib import ExitStack
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.cpu import pools as pools_mod
from agent.cpu import policy as policy_mod
from agent.cpu.calculator import TopoIndex, take_by_numa_balance
from agent.cpu.errors import RESOURCE_EXHAUSTED, PolicyError
from agent.cpu.policy import DynamicPolicy
from agent.cpu.pools import DEDICATED_NUMA_MODES, PoolOptions, _reclaim, _sizes
from agent.cpu.qos import RECLAIM_POOL, RECLAIMED, RESERVE_POOL, SHARED, SYSTEM
from agent.cpu.state import NUMAState, PolicyState, StateIndex
from agent.contracts.cpu import AllocationInfo
from agent.cpuset import CPUSet
from agent.topology.model import synthetic

from .helpers import Clock, make_policy, req


# -- the straightforward recomputation (every container, every call) ----------
def naive_bound_numas(idx: TopoIndex, s: PolicyState) -> set[int]:
    return {idx.numa_of[i] for a in s.containers() if a.is_dedicated_binding and not a.is_sidecar for i in a.cpuset}


def naive_shared_available(idx: TopoIndex, s: PolicyState, reserved: CPUSet, mode: str = "whole-node") -> CPUSet:
    avail = set(idx.all) - set(reserved)
    if mode == "whole-node":
        for n in naive_bound_numas(idx, s):
            avail -= idx.numa_cpus[n]
    else:
        for a in s.containers():
            if a.is_dedicated_binding and not a.is_sidecar:
                avail -= set(a.cpuset)
    return CPUSet(avail)


def naive_machine_state(idx: TopoIndex, s: PolicyState, with_entries: bool = False) -> dict[int, NUMAState]:
    allocated: dict[int, set[int]] = {n: set() for n in idx.numa_ids}
    per_numa: dict[int, dict] = {n: {} for n in idx.numa_ids}
    for a in s.containers():
        for i in a.cpuset:
            n = idx.numa_of[i]
            per_numa[n].setdefault((a.pod_uid, a.container_name), set()).add(i)
            if a.is_dedicated_binding and not a.is_sidecar:
                allocated[n].add(i)
    return {
        n: NUMAState(n, CPUSet(idx.numa_cpus[n] - allocated[n]), CPUSet(allocated[n]),
                     {k: CPUSet(v) for k, v in per_numa[n].items()} if with_entries else {})  # fmt: skip
        for n in idx.numa_ids
    }


def naive_sync_sidecars(s: PolicyState) -> PolicyState:
    entries = {uid: dict(pod) for uid, pod in s.entries.items()}
    for pod in entries.values():
        main = next((a for a in pod.values() if a.container_type == "MAIN"), None)
        for name, a in list(pod.items()):
            if a.is_sidecar and main is not None:
                if a.cpuset != main.cpuset or a.owner_pool_name != main.owner_pool_name:
                    pod[name] = AllocationInfo(**{**_fields(a), "cpuset": main.cpuset,
                                                  "owner_pool_name": main.owner_pool_name})  # fmt: skip
    return PolicyState(pools=dict(s.pools), entries=entries)


def _fields(a: AllocationInfo) -> dict:
    return {k: v for k, v in a.__dict__.items() if not k.startswith("_")}


def naive_adjust(idx: TopoIndex, s: PolicyState, reserved: CPUSet, opts: PoolOptions) -> PolicyState:
    avail = naive_shared_available(idx, s, reserved, opts.dedicated_numa)
    sums: dict[str, float] = {}
    for a in s.containers():
        if a.qos_level == SHARED and not a.ramp_up and a.owner_pool_name and not a.is_sidecar:
            sums[a.owner_pool_name] = sums.get(a.owner_pool_name, 0.0) + a.request_quantity
    quant = {p: max(1, math.ceil(round(q, 6))) for p, q in sums.items()}
    if not avail and any(a.qos_level == SHARED and not a.is_sidecar for a in s.containers()):
        raise PolicyError(RESOURCE_EXHAUSTED, "no_shared_cpus", "no cpu for shared")
    sizes = _sizes(quant, len(avail), opts)
    pools = {RESERVE_POOL: reserved}
    remaining = avail
    if sizes is None:
        pools.update({p: avail for p in quant})
        remaining = CPUSet()
    else:
        for p in sorted(sizes):
            pools[p], remaining = take_by_numa_balance(idx, remaining, sizes[p])
    pools[RECLAIM_POOL] = _reclaim(idx, remaining, avail, reserved, opts)
    entries = {}
    for uid, pod in s.entries.items():
        entries[uid] = {}
        for c, a in pod.items():
            f = _fields(a)
            if a.qos_level == SYSTEM:
                f["cpuset"] = CPUSet(idx.all)
            elif a.qos_level in (SHARED, RECLAIMED) and not a.is_sidecar:
                if a.ramp_up:
                    f["cpuset"], f["owner_pool_name"] = avail, ""
                elif a.owner_pool_name in pools:
                    f["cpuset"] = pools[a.owner_pool_name]
            entries[uid][c] = AllocationInfo(**f)
    return naive_sync_sidecars(PolicyState(pools=pools, entries=entries))


def naive() -> ExitStack:
    stack = ExitStack()
    for target, fn in (
        ("adjust", naive_adjust),
        ("machine_state", naive_machine_state),
        ("shared_available", naive_shared_available),
    ):
        stack.enter_context(mock.patch.object(policy_mod, target, fn))
    stack.enter_context(mock.patch.object(pools_mod, "shared_available", naive_shared_available))
    return stack


# -- random call sequences ----------------------------------------------------
UIDS = [f"p{i}" for i in range(6)]
QTY = st.sampled_from([0, 0.1, 0.25, 0.5, 1, 1.5, 2, 3])
OPS = st.one_of(
    st.tuples(st.just("shared"), st.sampled_from(UIDS), QTY, st.sampled_from([None, "batch", "web"]), st.booleans()),
    st.tuples(st.just("dedicated"), st.sampled_from(UIDS), st.integers(1, 6), st.booleans(), st.integers(-1, 3)),
    st.tuples(st.just("reclaimed"), st.sampled_from(UIDS), QTY),
    st.tuples(st.just("system"), st.sampled_from(UIDS)),
    st.tuples(st.just("sidecar"), st.sampled_from(UIDS), QTY, st.sampled_from([None, "reclaimed_cores"])),
    st.tuples(st.just("remove"), st.sampled_from(UIDS)),
    st.tuples(st.just("tick"), st.sampled_from([1, 31])),
    st.tuples(st.just("cgroup"), st.sampled_from(UIDS), st.sampled_from(["c1", "side"])),
    st.tuples(st.just("restart")),
)


def _call(p, op, clock):
    kind = op[0]
    if kind == "shared":
        _, uid, q, pool, running = op
        p.pod_running = lambda u, r=running: r
        return p.allocate(req(uid=uid, cpus=q, pool=pool))
    if kind == "dedicated":
        _, uid, n, excl, node = op
        r = req(uid=uid, qos="dedicated_cores", cpus=n, binding=True, exclusive=excl)
        if node < 0:
            hints = p.get_topology_hints(r).hints
            hint = hints[0].nodes if hints else (0,)
        else:
            hint = (node,)
        return p.allocate(req(uid=uid, qos="dedicated_cores", cpus=n, binding=True, exclusive=excl, hint=hint))
    if kind == "reclaimed":
        return p.allocate(req(uid=op[1], qos="reclaimed_cores", cpus=op[2]))
    if kind == "system":
        return p.allocate(req(uid=op[1], qos="system_cores", cpus=1))
    if kind == "sidecar":
        return p.allocate(req(uid=op[1], container="side", qos=op[3], cpus=op[2], ctype="SIDECAR"))
    if kind == "remove":
        return p.remove_pod(op[1])
    if kind == "tick":
        clock.t += op[1]
        return p.complete_ramp_up()
    if kind == "cgroup":
        return p.set_cgroup_path(op[1], op[2], f"/kubepods/{op[1]}/{op[2]}")
    raise AssertionError(kind)


def _outcome(p, op, clock):
    try:
        return ("ok", _call(p, op, clock))
    except PolicyError as e:
        return ("err", e.code, e.reason)


def _restarted(p, clock):
    return DynamicPolicy(p.topology, p.options, state=PolicyState.from_json(p.state.to_json()), clock=clock)


def _index_fields(ix: StateIndex) -> dict:
    return {k: getattr(ix, k) for k in ("follow", "qty", "qty_sum", "ramp", "system", "ded", "sidecar_pods",
                                        "qos_counts", "n_shared")}  # fmt: skip


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=40), enable_reclaim=st.booleans(),
       mode=st.sampled_from(DEDICATED_NUMA_MODES))
def test_incremental_equals_full_recomputation(ops, enable_reclaim, mode):
    topo = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=3, threads_per_core=2)  # 24 cpus
    ci, cr = Clock(), Clock()
    inc = make_policy(ci, topo=topo, reclaim_min=2, enable_reclaim=enable_reclaim, dedicated_numa=mode)
    with naive():
        ref = make_policy(cr, topo=topo, reclaim_min=2, enable_reclaim=enable_reclaim, dedicated_numa=mode)
    for op in ops:
        if op[0] == "restart":  # from the checkpointed form: the index starts from scratch
            inc = _restarted(inc, ci)
            with naive():
                ref = _restarted(ref, cr)
            continue
        got = _outcome(inc, op, ci)
        with naive():
            want = _outcome(ref, op, cr)
        assert got == want, op
        s = inc.state
        assert s.pools == ref.state.pools, op
        assert s.entries == ref.state.entries, op
        for a in s.containers():
            assert a.encoded() == _canonical(a.to_json())
        if s._ix is not None:
            assert _index_fields(s.index()) == _index_fields(StateIndex.build(s.entries)), op
        for u in UIDS:  # hints are reads over the same derived state
            r = req(uid=u, qos="dedicated_cores", cpus=2, binding=True, exclusive=False)
            try:
                h_inc = inc.get_topology_hints(r).hints
            except PolicyError as e:
                h_inc = e.reason
            with naive():
                try:
                    h_ref = ref.get_topology_hints(r).hints
                except PolicyError as e:
                    h_ref = e.reason
            assert h_inc == h_ref


def test_pool_resize_keeps_the_encoding_outside_the_cpuset():
    """A member moved to a resized pool re-joins its cached text around the
    new cpuset; the result is still the canonical encoding."""
    clock = Clock()
    p = make_policy(clock, enable_reclaim=True)
    p.allocate(req(uid="a", cpus=1))
    clock.t += 31
    assert p.complete_ramp_up()
    p.pod_running = lambda uid: True
    a = p.container("a", "c1")
    assert a.owner_pool_name == "share"
    before = a.encoded()  # cached on this entry
    p.allocate(req(uid="b", cpus=3))
    moved = p.container("a", "c1")
    assert moved.cpuset != a.cpuset
    assert moved.encoded() == _canonical(moved.to_json())
    shifted = a.with_cpuset(moved.cpuset)
    assert "_encp" in shifted.__dict__ and shifted.encoded() != before
    assert shifted.encoded() == moved.encoded()
    renamed = shifted.evolve(owner_pool_name="batch")
    assert "_encp" not in renamed.__dict__ and '"owner_pool_name":"batch"' in renamed.encoded()


def test_member_joining_an_unmoved_pool_is_repointed():
    """A ramp-up container whose request (0) leaves the pool's size unchanged
    joins it holding the ramp-up cpuset: only ``touched`` says it must move."""
    ops = [("shared", "p0", 1, None, False), ("tick", 31), ("shared", "p1", 0, None, False), ("tick", 31)]
    topo = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=3, threads_per_core=2)
    ci, cr = Clock(), Clock()
    inc = make_policy(ci, topo=topo, reclaim_min=2, enable_reclaim=True)
    with naive():
        ref = make_policy(cr, topo=topo, reclaim_min=2, enable_reclaim=True)
    for op in ops:
        _call(inc, op, ci)
        with naive():
            _call(ref, op, cr)
        assert inc.state.entries == ref.state.entries, op
    assert inc.container("p1", "c1").cpuset == inc.state.pools["share"]
    assert len(inc.state.pools["share"]) == 1
