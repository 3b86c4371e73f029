"""A device healthy again stays healthy when the recovery time is shorter than the error window.

The errors that made it unhealthy are history once it recovered: counted again on the next
tick, they flipped it unhealthy and healthy on alternate ticks until they left the window,
and the Slurm drain (agent.slurm.drainer) drained and resumed the node on whichever tick it
read (issue 35 part 3, seen in tests/integration/slurm/test_drain.py with recovery_s=3 and
error_window_s=30)."""

from __future__ import annotations

from agent.pressure.health import HealthPolicy, HealthTracker

DEV = ("block", "7:1")


def test_recovered_device_does_not_flap_while_its_old_errors_are_in_the_window():
    t = HealthTracker(HealthPolicy(threshold=1, window_s=30, recovery_s=3))
    t.observe(0, DEV, "write:28", 48, "write I/O errors", count_first=True)
    assert [c.healthy for c in t.tick(0)] == [False]
    assert t.tick(2) == []
    assert [c.healthy for c in t.tick(3)] == [True]
    changes = [c for now in (3.2, 3.4, 3.6, 10, 29, 31) for c in t.tick(now)]
    assert changes == [] and t.unhealthy() == {}
    # a new error after recovery counts on its own again
    t.observe(40, DEV, "write:28", 49, "write I/O errors", count_first=True)
    (down,) = t.tick(40)
    assert not down.healthy and "1 errors in 30s" in down.reason
