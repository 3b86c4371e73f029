"""The retention of ended pods as a pure decision (agent.workloads.retention, issue 32 item 6):
count per user and in total, age, log bytes; oldest first; a user's newest ended pod is never
taken for bytes."""

from __future__ import annotations

from agent.workloads.retention import Ended, RetentionRule, expired

NOW = 10_000.0


def _pods(*specs: tuple[str, int, float, int]) -> list[Ended]:
    return [Ended(uid, owner, at, size) for uid, owner, at, size in specs]


def test_no_rule_keeps_everything():
    pods = _pods(("a", 1, 1.0, 10**12), ("b", 2, 2.0, 0))
    assert RetentionRule().off
    assert expired(pods, RetentionRule(), NOW) == []


def test_per_user_keeps_each_users_newest():
    pods = _pods(("a1", 1, 10, 0), ("a2", 1, 20, 0), ("a3", 1, 30, 0), ("b1", 2, 5, 0))
    assert expired(pods, RetentionRule(per_user=2), NOW) == [("a1", "per_user")]
    # the input order does not matter: oldest first, by the time they ended
    assert expired(list(reversed(pods)), RetentionRule(per_user=1), NOW) == [("a1", "per_user"), ("a2", "per_user")]


def test_total_keeps_the_newest_across_users():
    pods = _pods(("a1", 1, 10, 0), ("b1", 2, 20, 0), ("a2", 1, 30, 0), ("c1", 3, 40, 0))
    assert expired(pods, RetentionRule(total=2), NOW) == [("a1", "total"), ("b1", "total")]


def test_age():
    pods = _pods(("old", 1, NOW - 100, 0), ("new", 1, NOW - 10, 0))
    assert expired(pods, RetentionRule(max_age_s=50), NOW) == [("old", "max_age")]
    assert expired(pods, RetentionRule(max_age_s=100), NOW) == []  # exactly the age stays


def test_bytes_removes_oldest_until_under_and_never_a_users_newest():
    pods = _pods(("a1", 1, 10, 400), ("a2", 1, 20, 400), ("b1", 2, 15, 400), ("a3", 1, 30, 400))
    # 1600 bytes, limit 900: a1 (oldest) then b1 would go, but b1 is user 2's only ended pod: a2 goes
    assert expired(pods, RetentionRule(log_bytes=900), NOW) == [("a1", "log_bytes"), ("a2", "log_bytes")]
    # a limit below every user's newest pod keeps those anyway
    assert expired(pods, RetentionRule(log_bytes=1), NOW) == [("a1", "log_bytes"), ("a2", "log_bytes")]
    assert expired(pods, RetentionRule(log_bytes=1600), NOW) == []


def test_bytes_counts_only_what_the_count_rules_keep():
    pods = _pods(("a1", 1, 10, 1000), ("a2", 1, 20, 100), ("a3", 1, 30, 100))
    # per_user takes a1 (and its 1000 bytes): the 200 left fit
    assert expired(pods, RetentionRule(per_user=2, log_bytes=300), NOW) == [("a1", "per_user")]


def test_each_pod_once_with_the_first_rule_it_broke():
    pods = _pods(("a1", 1, NOW - 1000, 10), ("a2", 1, NOW - 5, 10), ("a3", 1, NOW - 1, 10))
    got = expired(pods, RetentionRule(per_user=1, total=1, max_age_s=100, log_bytes=1), NOW)
    assert got == [("a1", "max_age"), ("a2", "per_user")]
