"""Journal records of the cpu policy: replaying them over a snapshot gives
back exactly the live state (random call sequences, records that name the
pool re-size rule instead of every follower), and every state the policy
commits passes the load-time validation."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.cpu.checkpoint import PolicyCodec, encode, encode_change
from agent.cpu.errors import PolicyError
from agent.cpu.state import validate_state
from agent.topology.model import synthetic

from .helpers import Clock, make_policy
from .test_incremental_equivalence import OPS, _call


def _run(ops, enable_reclaim, cut):
    topo = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=3, threads_per_core=2)  # 24 cpus
    clock = Clock()
    p = make_policy(clock, topo=topo, reclaim_min=2, enable_reclaim=enable_reclaim)
    online = frozenset(c.id for c in topo.cpus)
    records: list[bytes] = []
    last = [p.state]

    def listener(s):
        records.append(encode_change(last[0], s, p.last_change))
        last[0] = s

    p.listeners.append(listener)
    snapshots = [(encode(p.state, 0), 0)]
    for i, op in enumerate(ops):
        if op[0] == "restart":
            continue
        try:
            _call(p, op, clock)
        except PolicyError:
            pass
        validate_state(p.state, online)
        if i == cut:
            snapshots.append((encode(p.state, len(records)), len(records)))
    return p, records, snapshots, online


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=40), enable_reclaim=st.booleans(), cut=st.integers(0, 40))
def test_replay_of_records_equals_live_state(ops, enable_reclaim, cut):
    p, records, snapshots, online = _run(ops, enable_reclaim, cut)
    codec = PolicyCodec(online)
    for raw, seq in snapshots:
        r, got_seq = codec.decode_snapshot(raw)
        assert got_seq == seq
        for payload in records[seq:]:
            r = codec.apply(r, payload)
        replayed = r.finish()
        assert replayed.pools == p.state.pools
        assert replayed.entries == p.state.entries
    for payload in records:  # small records: the re-size rule, never the followers
        assert len(payload) < 4096, json.loads(payload).keys()
