"""The connection caps' decisions (agent.workloads.connlimit): per user, all users together, root
never counted, and refusals logged once per user per interval (issue 32 item 4)."""

from __future__ import annotations

import logging

from agent.workloads.connlimit import ConnectionLimiter, ConnectionPolicy, refusal, user_descriptor_budget

POLICY = ConnectionPolicy(per_user=2, user_descriptors=5)


def test_a_user_is_refused_past_its_own_cap_with_the_reason():
    assert refusal(POLICY, 1000, 1, held_by_user=1, user_descriptors_held=1) is None
    why = refusal(POLICY, 1000, 1, held_by_user=2, user_descriptors_held=2)
    assert why is not None and "the most a user may hold at once is 2" in why and "max_connections_per_user" in why


def test_users_together_are_refused_past_the_descriptors_lent_to_users():
    why = refusal(POLICY, 1001, 3, held_by_user=0, user_descriptors_held=3)
    assert why is not None and "5 descriptors" in why and "reserved_descriptors" in why
    assert refusal(POLICY, 1001, 2, held_by_user=0, user_descriptors_held=3) is None


def test_root_is_never_refused_nor_counted():
    assert refusal(POLICY, 0, 3, held_by_user=10**6, user_descriptors_held=10**6) is None
    lim = ConnectionLimiter(POLICY)
    for _ in range(100):
        assert lim.acquire(0, 3) is None
    assert lim.user_descriptors_held == 0 and lim.held(0) == 0


def test_the_budget_is_the_limit_less_the_reserve_and_never_negative():
    assert user_descriptor_budget(4096, 512) == 3584
    assert user_descriptor_budget(256, 512) == 0


def test_a_released_connection_gives_its_place_back():
    lim = ConnectionLimiter(POLICY)
    assert lim.acquire(1000, 1) is None and lim.acquire(1000, 1) is None
    assert lim.acquire(1000, 1) is not None  # at the cap; the refusal counted nothing
    assert lim.held(1000) == 2 and lim.user_descriptors_held == 2
    lim.release(1000, 1)
    assert lim.acquire(1000, 1) is None
    lim.release(1000, 1)
    lim.release(1000, 1)
    assert lim.held(1000) == 0 and lim.user_descriptors_held == 0


def test_refusals_are_logged_once_per_user_per_interval(caplog):
    now = [0.0]
    lim = ConnectionLimiter(ConnectionPolicy(per_user=0 + 1, user_descriptors=100), log_interval_s=60,
                            clock=lambda: now[0])
    assert lim.acquire(1000, 1) is None
    with caplog.at_level(logging.WARNING, logger="hwagent.workloads"):
        for _ in range(1000):
            assert lim.acquire(1000, 1) is not None
        lines = [r for r in caplog.records if "connections refused" in r.getMessage()]
        assert len(lines) == 1
        now[0] = 61.0
        assert lim.acquire(1000, 1) is not None
        lines = [r for r in caplog.records if "connections refused" in r.getMessage()]
        assert len(lines) == 2 and dict(lines[-1].fields)["refused_in_last_interval"] == 999
