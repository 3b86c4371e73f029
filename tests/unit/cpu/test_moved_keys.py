"""``moved_keys``: which containers a front must read back after the CPU policy changed.

NRI's placer tells running containers where they are (UpdateContainers) and reads back
only the containers ``moved_keys`` names instead of every container it placed. It must
never miss one: over random sequences of the policy's own calls (allocations of every
level, removals, ramp-ups ending, the advisor's re-sizes) every container whose entry,
as read, differs between two states is named, whichever state is the later one (an undo
goes back). And it must stay small: a change that moves no pool names only what it wrote."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.cpu.errors import PolicyError
from agent.cpu.qos import DEDICATED, RECLAIMED, SHARED, SYSTEM
from agent.cpu.state import PolicyState, moved_keys
from agent.topology.model import synthetic

from .helpers import Clock, make_policy, req

OPS = st.lists(st.tuples(st.sampled_from(["shared", "dedicated", "reclaimed", "system", "remove", "ramp", "resize"]),
                         st.integers(0, 11), st.integers(1, 3)), min_size=1, max_size=30)


def resolved(s: PolicyState) -> dict[tuple[str, str], tuple[object, ...]]:
    return {(a.pod_uid, a.container_name): (a.cpuset, a.owner_pool_name, a.ramp_up, a.qos_level)
            for a in s.containers()}


def really_moved(old: PolicyState, new: PolicyState) -> set[tuple[str, str]]:
    a, b = resolved(old), resolved(new)
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def run(ops: list[tuple[str, int, int]]) -> list[PolicyState]:
    clock = Clock()
    p = make_policy(clock, topo=synthetic(sockets=1, numa_per_socket=2, cores_per_numa=3, threads_per_core=2),
                    reserved_count=1, dedicated_numa="exclusive-cores")
    p.pod_running = lambda uid: int(uid[1:]) % 2 == 0 or None  # half ramp up first
    states = [p.state]
    for op, n, k in ops:
        uid = f"p{n}"
        try:
            if op == "shared":
                p.allocate(req(uid, "c", SHARED, cpus=k / 2))
            elif op == "dedicated":
                p.allocate(req(uid, "c", DEDICATED, cpus=1, binding=True, hint=(k % 2,)))
            elif op == "reclaimed":
                p.allocate(req(uid, "c", RECLAIMED, cpus=0))
            elif op == "system":
                p.allocate(req(uid, "c", SYSTEM, cpus=0))
            elif op == "remove":
                p.remove_pod(uid)
            elif op == "ramp":
                clock.t += 60
                p.complete_ramp_up()
            else:
                p.resize_shared(k + n % 3)
        except PolicyError:
            pass
        states.append(p.state)
    return states


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_every_container_whose_placement_changed_is_named_both_ways(ops: list[tuple[str, int, int]]) -> None:
    states = run(ops)
    for i in range(len(states)):
        for j in (i + 1, len(states) - 1):
            if j >= len(states):
                continue
            moved = really_moved(states[i], states[j])
            for old, new in ((states[i], states[j]), (states[j], states[i])):
                named = moved_keys(old, new)
                if named is not None:
                    assert moved <= named, (moved - named, ops[i:j])


def test_a_change_that_moves_no_pool_names_only_the_container_it_wrote() -> None:
    """500 shared containers ramping up (they follow the ramp-up set), then one more: the
    policy's change is one entry, and one container is named, not 501."""
    p = make_policy(Clock())
    for i in range(500):
        p.allocate(req(f"u{i}", "c", SHARED, cpus=0.1))
    before = p.state
    p.allocate(req("new", "c", SHARED, cpus=0.1))
    assert moved_keys(before, p.state) == {("new", "c")}
    assert moved_keys(p.state, p.state) == set()


def test_a_pool_resize_names_the_members_that_moved() -> None:
    """A dedicated container on a node with shared containers re-sizes the pools: every
    shared member is named (each one moved). (Before any re-size since the start, it
    cannot tell: None, and the caller compares all, once.)"""
    p = make_policy(Clock())
    p.pod_running = lambda uid: True
    p.allocate(req("first", "c", DEDICATED, cpus=1, binding=True, hint=(1,)))  # the first re-size: a basis
    for i in range(50):
        p.allocate(req(f"u{i}", "c", SHARED, cpus=0.1))
    before = p.state
    p.allocate(req("ded", "c", DEDICATED, cpus=2, binding=True, hint=(0,)))
    moved = really_moved(before, p.state)
    named = moved_keys(before, p.state)
    assert named is not None and len(moved) == 51 and moved <= named, (len(moved), len(named or ()))
