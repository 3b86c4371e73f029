from __future__ import annotations

import json

import pytest

from agent.cpu.checkpoint import CheckpointError, CheckpointStore, decode, encode
from agent.cpu.policy import DynamicPolicy, PolicyOptions

from .helpers import Clock, make_policy, req, upstream_topology


def _populated():
    clock = Clock()
    p = make_policy(clock)
    p.allocate(req(uid="s1"))
    clock.t += 31
    p.resources_allocation()
    p.allocate(req(uid="d1", qos="dedicated_cores", binding=True, exclusive=True, hint=(3,)))
    p.allocate(req(uid="r1", qos="reclaimed_cores"))
    p.set_cgroup_path("d1", "c1", "/kubepods/podd1/abc")
    return p


def test_round_trip_and_restart(tmp_path):
    p = _populated()
    store = CheckpointStore(tmp_path / "cpu")
    store.save(p.state)
    loaded = store.load()
    assert loaded == p.state
    # restart: same allocations, pools regenerated/kept, reserve rewritten
    p2 = DynamicPolicy(upstream_topology(), PolicyOptions(reserved_count=2), state=loaded, clock=Clock())
    assert p2.state.entries == p.state.entries
    assert p2.state.pools == p.state.pools
    assert p2.container("d1", "c1").cgroup_path == "/kubepods/podd1/abc"


def test_missing_file_is_empty(tmp_path):
    assert CheckpointStore(tmp_path).load() is None


@pytest.mark.parametrize(
    "mutate,msg",
    [
        (lambda raw: raw[:-10], "not valid JSON"),
        (lambda raw: raw.replace(b'"reclaim":"', b'"reclaim":"0,'), "checksum mismatch"),
        (lambda raw: raw.replace(b'"version":2', b'"version":9'), "unsupported format version"),
        (lambda raw: b"[]", "not a JSON object"),
    ],
)
def test_corrupt_stops_start_unless_loss_accepted(tmp_path, mutate, msg):
    p = _populated()
    store = CheckpointStore(tmp_path)
    store.save(p.state)
    good = store.path.read_bytes()
    store.path.write_bytes(mutate(good))
    with pytest.raises(CheckpointError) as e:
        store.load()
    assert msg in str(e.value) and "accept_state_loss" in str(e.value) and "Drain" in str(e.value)
    assert store.path.exists()  # nothing destroyed on refusal
    assert store.load(accept_loss=True) is None
    aside = list(tmp_path.glob("cpu_plugin_state.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == mutate(good)
    assert not store.path.exists()


def test_checksum_covers_data():
    p = _populated()
    doc = json.loads(encode(p.state))
    doc["data"]["pod_entries"]["d1"]["c1"]["cpuset"] = "0-15"
    with pytest.raises(CheckpointError, match="checksum"):
        decode(json.dumps(doc).encode())


def test_checkpoint_from_other_topology_refused(tmp_path):
    p = _populated()
    from agent.topology.model import synthetic

    small = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2, threads_per_core=2)
    with pytest.raises(ValueError, match="topology changed"):
        DynamicPolicy(small, PolicyOptions(), state=p.state)


def test_atomic_write_leaves_no_temp(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save(_populated().state)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["cpu_plugin_state.json", "cpu_plugin_state.json.wal"]


def test_incremental_encoding_matches_canonical():
    from agent.cpu.checkpoint import _checksum, _data_json
    from agent.statefile import canonical_json

    p = _populated()
    st = p.state
    assert _data_json(st).encode() == canonical_json(st.to_json(), ensure_ascii=True)
    doc = json.loads(encode(st))
    assert doc["checksum"] == _checksum(2, "dynamic", st.to_json(), 0)
    # an evolved entry drops its cached encoding
    a = st.get("d1", "c1")
    a.encoded()
    b = a.evolve(cgroup_path="/x")
    assert '"/x"' in b.encoded() and '"/x"' not in a.encoded()


def test_version_1_file_is_still_read_as_a_snapshot_without_journal(tmp_path):
    from agent.cpu.checkpoint import _checksum

    st = _populated().state
    data = st.to_json()
    doc = {"version": 1, "policy": "dynamic", "data": data, "checksum": _checksum(1, "dynamic", data)}
    store = CheckpointStore(tmp_path)
    store.path.write_text(json.dumps(doc))
    back = store.load()
    assert back == st
    assert store.last_recovery.snapshot_seq == 0


def test_a_restart_shares_one_cpuset_among_the_members_of_a_pool(tmp_path):
    """Issue 24: in memory the members of a pool hold its cpuset by reference; a restart
    parsed one copy per member (73 MB of frozensets at 10,000 pods, RSS 2.6x the steady
    state, and 1.7 s of the 2.4 s load). Equal cpuset texts now decode to one object."""
    clock = Clock()
    p = make_policy(clock)
    for i in range(50):
        p.allocate(req(uid=f"s{i}"))
    clock.t += 31
    p.resources_allocation()  # ramp-up over: the members follow the pool
    store = CheckpointStore(tmp_path / "cpu")
    store.save(p.state)
    loaded = store.load()
    assert loaded == p.state
    sets = [a.cpuset for a in loaded.containers() if a.pod_uid.startswith("s")]
    assert len(sets) == 50 and len({id(s) for s in sets}) == 1


def test_a_snapshot_as_written_is_verified_on_its_bytes_not_encoded_again(monkeypatch):
    """Issue 24: the checksum re-encoded every entry at start (72 ms of CPU at 10,000 pods)."""
    import agent.cpu.checkpoint as cp

    calls: list[object] = []
    real = cp._checksum
    monkeypatch.setattr(cp, "_checksum", lambda *a: calls.append(a) or real(*a))
    p = _populated()
    assert decode(encode(p.state, 7)) == p.state
    assert calls == []


def test_every_one_byte_change_of_a_snapshot_is_refused():
    raw = encode(_populated().state, 7)
    for i in range(len(raw)):
        with pytest.raises(CheckpointError):
            decode(raw[:i] + bytes([raw[i] ^ 0x01]) + raw[i + 1:])


def test_a_snapshot_laid_out_otherwise_is_still_checked_on_its_meaning():
    p = _populated()
    doc = json.loads(encode(p.state, 7))
    assert decode(json.dumps(doc, indent=1).encode()) == p.state
    doc["journal_seq"] = 8
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        decode(json.dumps(doc, indent=1).encode())


def test_encoding_a_snapshot_or_a_record_leaves_no_text_on_the_entries():
    """Issue 24: a cached encoding on every entry held ~25 MB at 10,000 pods once a
    snapshot had been written (the daemon's RSS after its first compaction); snapshots
    come every few MB of journal now, so the text is made when written and dropped."""
    from agent.cpu.checkpoint import encode_change

    p = _populated()
    old = p.state
    p.allocate(req(uid="s2"))
    encode_change(old, p.state, p.last_change)
    raw = encode(p.state, 3)
    assert decode(raw) == p.state
    cached = [(uid, c) for uid, pod in p.state.stored.items() for c, a in pod.items()
              if "_enc" in a.__dict__ or "_encp" in a.__dict__]
    assert cached == []
