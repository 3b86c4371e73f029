"""The OOM-kill count, read as the kubelet reads it, from either cgroup version's file."""

from __future__ import annotations

from agent.cgroups.oom import oom_kills, parse_oom_kill

V1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"
V2 = "low 0\nhigh 0\nmax 14\noom 1\noom_kill 1\noom_group_kill 0\n"


def test_both_versions_name_the_count_oom_kill():
    assert parse_oom_kill(V1) == 2
    assert parse_oom_kill(V2) == 1  # "oom 1" is the limit being hit, not a kill
    # an old v1 kernel (before 4.13) has no count: unknown, not zero
    assert parse_oom_kill("oom_kill_disable 0\nunder_oom 0\n") is None
    assert parse_oom_kill(None) is None


def test_the_reader_takes_whichever_file_the_memory_controller_has():
    files = {("/c", "memory.oom_control"): V1}
    assert oom_kills(lambda rel, name: files.get((rel, name)), "/c") == 2
    files = {("/c", "memory.events"): V2, ("/c", "memory.oom_control"): V1}
    assert oom_kills(lambda rel, name: files.get((rel, name)), "/c") == 1
    assert oom_kills(lambda rel, name: None, "/c") == 0  # no memory cgroup (no limit): no OOM kill counted
