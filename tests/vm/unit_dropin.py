"""The systemd drop-in the VM tier gives hwagent.service in its emulated guest.

Why: the shipped unit's time budgets are right for a real machine (the daemon is up in a
couple of seconds, TimeoutStartSec=60s), but under TCG on a loaded host Python runs
many times slower and the first start reads every module over 9p: a guest once logged
"hwagent starting" 43 s after systemd started it, and the start timed out. The tier
keeps the unit as shipped and adds a drop-in that scales each time budget of the unit
by the guest's measured slowdown (tests/vm/calibrate.py), read from the installed unit
itself so the two cannot drift.

Pure functions; the guest test writes the file (tests/vm/guest/test_systemd_unit.py).
"""

from __future__ import annotations

import math
import re

from tests.vm import calibrate

__all__ = ["DROPIN", "TIMED_KEYS", "parse_timespan", "unit_timings", "scaled_timings", "render_dropin"]

#: where the guest test writes it (the guest's /etc is its tmpfs overlay, never the host's)
DROPIN = "/etc/systemd/system/hwagent.service.d/50-vm-tier-emulator.conf"
#: the unit's settings that are time budgets for work the daemon or systemd does. Not
#: RestartSec (a pause before a restart, not a budget: scaling it only slows restarts)
TIMED_KEYS = ("TimeoutStartSec", "TimeoutStopSec", "WatchdogSec")
#: scaled by the ratio alone, without calibrate.SAFETY: WatchdogSec is also how long the
#: wedged-daemon test must wait for systemd to act, and the unit's 30 s is already 15x
#: the daemon's ping interval's need on a real machine (it pings every WatchdogSec/2)
NO_SAFETY = ("WatchdogSec",)
#: ... and by at most this much: the watchdog absorbs the daemon's loop stalls, not its
#: work, and the unit's own 30 s passed unscaled at 8.7x and 16.5x slowdowns (tests/vm/README.md);
#: the full ratio made the wedged-daemon test wait 495 s on a quiet host (649 s guest run, was 211)
RATIO_CAP = {"WatchdogSec": 3.0}

_UNITS = {
    "us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hr": 3600.0, "hour": 3600.0,
    "hours": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0,
}
_TERM = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


def parse_timespan(text: str) -> float:
    """A systemd time span ("60s", "1min 30s", "90", "infinity") in seconds (inf for infinity).

    A bare number is seconds, as systemd reads these settings. Raises ValueError on
    anything else."""
    s = text.strip().lower()
    if s == "infinity":
        return math.inf
    total, pos = 0.0, 0
    for m in _TERM.finditer(s):
        if s[pos:m.start()].strip() or m.group(2) not in _UNITS and m.group(2) != "":
            raise ValueError(f"not a systemd time span: {text!r}")
        total += float(m.group(1)) * _UNITS.get(m.group(2), 1.0)
        pos = m.end()
    if pos == 0 or s[pos:].strip():
        raise ValueError(f"not a systemd time span: {text!r}")
    return total


def unit_timings(unit_text: str) -> dict[str, float]:
    """The TIMED_KEYS set in the unit's [Service] section, in seconds (the last wins, as in systemd)."""
    out: dict[str, float] = {}
    section = ""
    for raw in unit_text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        if section == "Service" and sep and key.strip() in TIMED_KEYS:
            out[key.strip()] = parse_timespan(value)
    return out


def scaled_timings(real: dict[str, float], ratio: float) -> dict[str, int]:
    """Each budget for a guest ``ratio`` times slower than its host: calibrate.budget,
    without the safety margin for NO_SAFETY, the ratio capped by RATIO_CAP; whole seconds, rounded up, never under
    the real value. An infinite budget stays out (nothing to scale)."""
    out: dict[str, int] = {}
    for key, seconds in real.items():
        if math.isinf(seconds):
            continue
        r = min(ratio, RATIO_CAP.get(key, ratio))
        want = seconds * r if key in NO_SAFETY else calibrate.budget(seconds, r)
        out[key] = max(math.ceil(seconds), math.ceil(want))
    return out


def render_dropin(real: dict[str, float], ratio: float) -> str:
    """The drop-in's text: each scaled budget with the unit's own value and the ratio beside it."""
    scaled = scaled_timings(real, ratio)
    lines = [
        "# written by the VM tier (tests/vm/unit_dropin.py) in its emulated guest only:",
        f"# this guest runs {ratio:.1f}x slower than its host (tests/vm/calibrate.py), so the",
        "# unit's time budgets are scaled by that (x calibrate.SAFETY but for WatchdogSec, whose",
        f"# ratio is capped at {RATIO_CAP['WatchdogSec']:g})",
        "[Service]",
    ]
    for key in TIMED_KEYS:
        if key in scaled:
            lines.append(f"# {key} on a real machine: {real[key]:g}s")
            lines.append(f"{key}={scaled[key]}s")
    return "\n".join(lines) + "\n"
