"""The pod -> container -> resource -> devices table: its operations, its
checkpoint round trip, and the rules it checks on what is read back."""

from __future__ import annotations

import dataclasses

import pytest

from agent.devicemanager.checkpoint import CheckpointCorrupt, decode, encode
from agent.contracts.devices import CheckpointData
from agent.contracts.devices import Allocation
from agent.devicemanager.pod_devices import InconsistentAllocations, PodDevices

R, S = "example.com/r", "example.com/s"


def alloc(uid, container, ctype, *ids, resource=R, committed=True):
    return Allocation(uid, "ns", uid, container, ctype, resource, tuple((d, (0,)) for d in ids),
                      b"\x0a\x00" if committed else None)


def test_insert_indexes_by_key_pod_and_device():
    t = PodDevices()
    a, b = alloc("p", "c1", "app", "d1", "d2"), alloc("p", "c2", "app", "d3", resource=S)
    t.insert(a)
    t.insert(b)
    assert t.get(a.key) is a and t.holds(a) and len(t) == 2
    assert t.pods() == ["p"]
    assert t.container_devices("p", "c1", R) == ("d1", "d2") and t.container_devices("p", "c1", S) == ()
    assert t.in_use(R, "d1") and not t.in_use(S, "d1") and not t.in_use(R, "d3")
    assert t.free(R, {"d1", "d2", "d4"}) == {"d4"}
    assert t.allocated_count(R) == 2 and t.allocated_count(S) == 1


def test_insert_under_a_known_key_replaces_its_devices():
    t = PodDevices()
    t.insert(alloc("p", "c", "app", "d1"))
    t.insert(alloc("p", "c", "app", "d2"))
    assert t.container_devices("p", "c", R) == ("d2",) and not t.in_use(R, "d1") and len(t) == 1


def test_remove_and_remove_pod_clean_every_index():
    t = PodDevices()
    a, b, c = alloc("p", "c1", "app", "d1"), alloc("p", "c2", "app", "d2"), alloc("q", "c", "app", "d3")
    for x in (a, b, c):
        t.insert(x)
    assert t.remove(a.key) is a and t.remove(a.key) is None
    assert not t.in_use(R, "d1") and t.pods() == ["p", "q"]
    assert sorted(t.remove_pod("p")) == [b.key] and t.remove_pod("p") == []
    assert t.pods() == ["q"] and t.allocated_count(R) == 1 and list(t) == [c]


def test_holds_tells_a_reservation_from_its_replacement():
    t = PodDevices()
    reserved = alloc("p", "c", "app", "d1", committed=False)
    t.insert(reserved)
    assert not t.pod_committed("p") and t.committed() == [] and t.container_allocations("p") == {}
    done = dataclasses.replace(reserved, response=b"")
    t.commit(done)
    assert t.holds(done) and not t.holds(reserved) and t.in_use(R, "d1")
    assert t.pod_committed("p") and t.committed() == [done] and t.container_allocations("p") == {"c": [done]}


def test_reuse_pool_and_pod_devices():
    t = PodDevices()
    t.insert(alloc("p", "init1", "init", "d1", "d2"))
    t.insert(alloc("p", "init2", "init", "d3"))
    t.insert(alloc("p", "app", "app", "d1"))
    t.insert(alloc("q", "init", "init", "d9"))
    assert t.reusable("p", R) == {"d2", "d3"}  # d1 is taken by the app container
    assert t.reusable("p", S) == set() and t.reusable("x", R) == set()
    assert t.pod_devices("p", R) == {"d1", "d2", "d3"}


def test_checkpoint_round_trip():
    t = PodDevices()
    kept = [alloc("p", "i", "init", "d1"), alloc("p", "a", "app", "d1", "d2"), alloc("q", "a", "sidecar", "d3")]
    for a in kept:
        t.insert(a)
    t.insert(alloc("r", "a", "app", "d4", committed=False))  # a reservation is not state
    assert t.to_checkpoint() == tuple(kept)
    back = PodDevices.from_checkpoint(decode(encode(CheckpointData(allocations=t.to_checkpoint()))).allocations)
    assert list(back) == kept and back.reusable("p", R) == set() and back.allocated_count(R) == 3


@pytest.mark.parametrize("allocs,why", [
    ((alloc("p", "a", "app", "d1"), alloc("q", "a", "app", "d1")), "held by"),  # two pods, one device
    ((alloc("p", "a", "app", "d1"), alloc("p", "b", "app", "d1")), "held by"),  # two app containers
    ((alloc("p", "i", "init", "d1"), alloc("q", "a", "app", "d1")), "held by"),  # reuse is per pod
    ((alloc("p", "a", "app", "d1", "d1"),), "twice or an empty id"),
    ((alloc("p", "a", "app", ""),), "twice or an empty id"),
    ((alloc("", "a", "app", "d1"),), "empty pod uid"),
    ((alloc("p", "a", "ghost", "d1"),), "unknown container type"),
    ((alloc("p", "a", "app", "d1"), alloc("p", "a", "app", "d2")), "recorded twice"),
])
def test_what_no_run_could_produce_is_refused_before_any_change(allocs, why):
    t = PodDevices()
    t.insert(alloc("z", "c", "app", "d7"))
    with pytest.raises(InconsistentAllocations, match=why):
        t.add_checked(allocs)
    assert [a.key for a in t] == [("z", "c", R)]  # nothing changed
    with pytest.raises(CheckpointCorrupt):  # on load: corruption (the entry decoder may name it first)
        decode(encode(CheckpointData(allocations=allocs)))


def test_init_reuse_is_accepted_and_a_record_replaces_its_key():
    t = PodDevices.from_checkpoint([alloc("p", "i", "init", "d1"), alloc("p", "j", "init", "d1"),
                                    alloc("p", "a", "app", "d1")])
    assert len(t) == 3
    with pytest.raises(InconsistentAllocations, match="held by"):
        t.add_checked([alloc("p", "b", "app", "d1")])  # a second later container
    t.add_checked([alloc("p", "a", "app", "d2")])  # the same key again: replaces, frees d1 for b
    t.add_checked([alloc("p", "b", "app", "d1")])
    assert t.container_devices("p", "a", R) == ("d2",) and t.container_devices("p", "b", R) == ("d1",)
