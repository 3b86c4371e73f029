"""Repeated error lines are rate-limited on the daemon's log stream; a counter keeps the total."""

from __future__ import annotations

import io
import logging

from prometheus_client import REGISTRY

from agent.daemon.logs import RepeatLimiter, setup_logging
from agent.eventlog import get_logger


def _suppressed(logger: str, level: str) -> float:
    return REGISTRY.get_sample_value("hwagent_log_lines_suppressed_total", {"logger": logger, "level": level}) or 0.0


def test_a_flood_of_one_warning_becomes_a_few_lines_and_a_count():
    buf = io.StringIO()
    handler = setup_logging("info", stream=buf, journald=False)
    log = get_logger("hwagent.test.flood")
    before = _suppressed("hwagent.test.flood", "warning")
    try:
        for i in range(1000):
            log.warning("request refused", method="Allocate", error=f"bad body {i}")  # fields vary, the event does not
        log.info("registered", resource="x")  # info lines are never limited
        log.error("other event", n=1)  # a different event has its own budget
    finally:
        logging.getLogger().removeHandler(handler)
    lines = buf.getvalue().splitlines()
    refused = [line for line in lines if 'msg="request refused"' in line]
    assert 1 <= len(refused) <= RepeatLimiter.DEFAULT_BURST
    assert any("registered" in line for line in lines) and any("other event" in line for line in lines)
    assert _suppressed("hwagent.test.flood", "warning") - before == 1000 - len(refused)


def test_next_window_reports_how_many_were_dropped():
    now = [0.0]
    lim = RepeatLimiter(burst=2, interval=10.0, clock=lambda: now[0])

    def rec(i):
        return logging.getLogger("hwagent.test.w").makeRecord(
            "hwagent.test.w", logging.WARNING, __file__, 1, "event n=%d", (i,), None)

    passed = [lim.filter(rec(i)) for i in range(7)]
    assert passed == [True, True, False, False, False, False, False]
    now[0] = 10.5
    r = rec(99)
    assert lim.filter(r) and r.suppressed == 5
    r2 = rec(100)
    assert lim.filter(r2) and not hasattr(r2, "suppressed")
    # the limiter's memory is bounded however many distinct messages arrive
    for i in range(RepeatLimiter.MAX_KEYS * 2):
        lim.filter(logging.getLogger("x").makeRecord("x", logging.WARNING, __file__, 1, f"dynamic {i}", (), None))
    assert len(lim._state) <= RepeatLimiter.MAX_KEYS
