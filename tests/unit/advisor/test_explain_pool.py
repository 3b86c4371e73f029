"""`hwagent explain pool` from the advisor's files (pure: no daemon)."""

from __future__ import annotations

from pathlib import Path

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


def test_shared_requests_beyond_the_cpus_they_may_use_read_as_overcommitted():
    """issue 37 item 13: `explain` said "its requests need 1" of pods requesting 1.5 CPUs on one CPU."""
    from agent.commands.explain import _pod

    last = {"action": "hold", "shared_size": 1, "quota_cpus": None, "target_us": 400.0, "wall_time": 1.0,
            "shared_pods": ["default/web", "default/work"], "reclaimed_pods": [],
            "limits": {"shared_min": 1, "shared_max": 1, "reclaim_cpus": 1, "shared_requests": 1.5},
            "inputs": {"shared_p99_us": None, "shared_usage": 0.0, "reclaimed": 0}}
    lines = _pool("/r", None, [last])
    over = [line for line in lines if line.startswith("overcommitted: shared pods request 1.5 CPUs in all, more "
                                                      "than the 1 CPU they may run on")]
    assert len(over) == 1, lines
    assert over[0] in _pod(Path("/nonexistent"), "default", "work", [last]), "the shared pod's own explanation"
    fits = {**last, "limits": {**last["limits"], "shared_requests": 1.0}}
    assert not [line for line in _pool("/r", None, [fits]) if line.startswith("overcommitted")]
