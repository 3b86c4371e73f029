from __future__ import annotations

from agent.pressure.health import HealthDriver, HealthPolicy, HealthTracker


class Board:
    def __init__(self, fail: bool = False) -> None:
        self.calls = []
        self.fail = fail

    def set_health_for(self, kind, key, healthy, reason, source):
        if self.fail:
            raise RuntimeError("board down")
        self.calls.append((kind, key, healthy, reason, source))
        return ["dev-1"]


DEV = ("block", "7:0")


def test_threshold_within_window_then_recovery_after_quiet_period():
    t = HealthTracker(HealthPolicy(threshold=3, window_s=10, recovery_s=30))
    t.observe(0, DEV, "write:28", 2, "write I/O errors", count_first=True)
    assert t.tick(0) == []  # 2 < 3
    t.observe(20, DEV, "write:28", 3, "write I/O errors", count_first=True)
    assert t.tick(20) == []  # the first 2 fell out of the 10 s window
    t.observe(25, DEV, "write:28", 6, "write I/O errors", count_first=True)
    (down,) = t.tick(25)
    assert not down.healthy and "4 errors in 10s" in down.reason and "write I/O errors" in down.reason
    assert t.tick(50) == []  # quiet for 25 s < 30 s
    (up,) = t.tick(55)
    assert up.healthy and t.unhealthy() == {}


def test_new_errors_restart_the_quiet_period():
    t = HealthTracker(HealthPolicy(threshold=1, window_s=10, recovery_s=30))
    t.observe(0, DEV, "c", 1, "e", count_first=True)
    assert len(t.tick(0)) == 1
    t.observe(20, DEV, "c", 2, "e", count_first=True)
    assert t.tick(40) == []
    assert t.tick(50)[0].healthy


def test_first_reading_of_since_boot_counter_is_a_baseline():
    t = HealthTracker(HealthPolicy(threshold=1))
    t.observe(0, ("net", "eth0"), "tx_errors", 500, "TX errors", count_first=False)
    assert t.tick(0) == []
    t.observe(1, ("net", "eth0"), "tx_errors", 501, "TX errors", count_first=False)
    assert t.tick(1)[0].key == "eth0"


def test_counter_reset_is_not_an_error():
    t = HealthTracker(HealthPolicy(threshold=1))
    t.observe(0, DEV, "c", 5, "e", count_first=False)
    t.observe(1, DEV, "c", 0, "e", count_first=False)
    assert t.tick(1) == []


def test_driver_pushes_to_board_and_survives_a_broken_board():
    board = Board()
    d = HealthDriver(HealthTracker(HealthPolicy(threshold=1, recovery_s=5)), board)
    d.update(0, {DEV: {"write:28": (1, "write I/O errors (errno 28)")}})
    assert board.calls[0][:3] == ("block", "7:0", False) and board.calls[0][4] == "hwagent-probes"
    assert d.state[DEV] is False
    d.update(6, {DEV: {"write:28": (1, "x")}})
    assert board.calls[-1][:3] == ("block", "7:0", True)
    broken = HealthDriver(HealthTracker(HealthPolicy(threshold=1)), Board(fail=True))
    assert len(broken.update(0, {DEV: {"c": (1, "e")}})) == 1  # change still recorded
    assert broken.state[DEV] is False
