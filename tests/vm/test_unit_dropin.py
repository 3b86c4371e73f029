"""tests/vm/unit_dropin.py: the emulator's drop-in scales the shipped unit's own budgets."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from tests.vm import calibrate
from tests.vm.unit_dropin import parse_timespan, render_dropin, scaled_timings, unit_timings

SHIPPED = Path(__file__).resolve().parents[2] / "systemd" / "hwagent.service"


@pytest.mark.parametrize(("text", "seconds"), [
    ("60s", 60.0), ("90", 90.0), ("1min 30s", 90.0), ("5min 9s", 309.0), ("1h 2min", 3720.0),
    ("500ms", 0.5), ("infinity", math.inf),
])
def test_systemd_time_spans_are_read_as_systemd_reads_them(text: str, seconds: float) -> None:
    assert parse_timespan(text) == seconds


@pytest.mark.parametrize("bad", ["", "soon", "60 parsecs", "s60", "1min and 2s"])
def test_a_span_that_is_not_one_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a systemd time span"):
        parse_timespan(bad)


def test_the_shipped_units_budgets_are_read_from_its_service_section() -> None:
    real = unit_timings(SHIPPED.read_text())
    assert set(real) == {"TimeoutStartSec", "TimeoutStopSec", "WatchdogSec"}
    assert real["TimeoutStartSec"] == 60 and real["WatchdogSec"] == 30  # the real machine's, unchanged


def test_budgets_scale_by_the_slowdown_and_never_shrink() -> None:
    real = {"TimeoutStartSec": 60.0, "TimeoutStopSec": 30.0, "WatchdogSec": 30.0, "X": math.inf}
    scaled = scaled_timings(real, 10.0)
    assert scaled["TimeoutStartSec"] == math.ceil(calibrate.budget(60, 10.0))
    assert scaled["TimeoutStopSec"] == math.ceil(calibrate.budget(30, 10.0))
    assert scaled["WatchdogSec"] == 90  # the ratio alone, capped at 3: the wedged-daemon test waits it out
    assert scaled_timings(real, 2.0)["WatchdogSec"] == 60
    assert "X" not in scaled
    assert scaled_timings(real, 1.0)["WatchdogSec"] == 30


@pytest.mark.skipif(not Path("/usr/bin/systemd-analyze").exists(), reason="needs systemd-analyze")
def test_systemd_accepts_the_dropin_over_the_shipped_unit(tmp_path: Path) -> None:
    """systemd-analyze verify reads the unit and its drop-in as systemd would load them."""
    unit = tmp_path / "hwagent.service"
    unit.write_text(SHIPPED.read_text().replace("/usr/local/bin/hwagent", "/bin/true"))
    dropin = tmp_path / "hwagent.service.d" / "50-vm-tier-emulator.conf"
    dropin.parent.mkdir()
    dropin.write_text(render_dropin(unit_timings(SHIPPED.read_text()), 12.5))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True,
                       env={"SYSTEMD_UNIT_PATH": f"{tmp_path}:", "PATH": "/usr/bin:/bin"})
    assert "50-vm-tier-emulator.conf" not in r.stderr, r.stderr
    assert "TimeoutStartSec=2250s" in dropin.read_text() and "WatchdogSec=90s" in dropin.read_text()
