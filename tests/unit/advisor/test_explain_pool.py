"""`hwagent explain pool` from the advisor's files (pure: no daemon)."""

from __future__ import annotations

from agent.commands.explain import _pool


def test_the_pool_view_counts_the_reclaimed_pods_from_state_alone():
    """state.json's last decision keeps the inputs' count, not the pod names the decisions log has:
    the pool view said `reclaimed pods (0)` beside three running hogs."""
    last = {"action": "suppress", "shared_size": 2, "quota_cpus": 0.1, "target_us": 400.0,
            "limits": {"shared_min": 1, "shared_max": 2, "reclaim_cpus": 2},
            "inputs": {"shared_p99_us": 900.0, "shared_usage": 1.0, "reclaimed": 3}}
    lines = _pool("/r", {"last": last, "headroom_cpus": 0.1}, [])
    assert any(line.startswith("reclaimed pods (3): suppressed, held together to 0.1 cpus") for line in lines), lines
    named = {**last, "reclaimed_pods": ["a/x", "a/y"], "inputs": {**last["inputs"], "reclaimed": 2}}
    assert any(line.startswith("reclaimed pods (2)") for line in _pool("/r", None, [named])), "from the log too"
