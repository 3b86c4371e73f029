"""A guest's gate test: when it fails for a timeout, the guest stops there.

Why: in the systemd guest, every test after the first needs the unit the first one
started. When that start ran out of time (TCG on a loaded host), the tests after it
waited out their own timeouts one by one on a unit systemd kept restarting, and the
guest spent its whole budget saying nothing new. A test marked ``vm_gate`` that fails
for a timeout ends the guest's pytest session at once, with a reason that names the
test, the timeout and how many tests were not run (tests/vm/guest/conftest.py sets
``session.shouldstop``; tests/vm/progress.py brings the reason back to the host).

A gate that fails for any other reason does not stop the session: the tests after it
then fail fast and say more.
"""

from __future__ import annotations

import re
import subprocess

__all__ = ["GuestTimeout", "MARKER", "is_timeout", "stop_reason"]

#: the marker of a gate test (registered by tests/vm/guest/conftest.py)
MARKER = "vm_gate"
#: systemctl's words when a start/stop job ran past the unit's timeout
SYSTEMD_TIMEOUT = "timeout was exceeded"
#: how pytest-timeout words its failure: "Timeout (>300.0s) from pytest-timeout." (2.x),
#: "Timeout >300.0s" (1.x)
PYTEST_TIMEOUT = re.compile(r"Timeout \(?>[0-9.]+s\)?")


class GuestTimeout(AssertionError):
    """A guest test's wait ran out (its own deadline, or systemd's timeout of a job)."""


def is_timeout(exc: BaseException) -> bool:
    """Whether a test failed because something ran out of time, not because it was wrong."""
    if isinstance(exc, (GuestTimeout, subprocess.TimeoutExpired)):
        return True
    return PYTEST_TIMEOUT.match(str(exc)) is not None


def stop_reason(test: str, exc: BaseException, not_run: int) -> str:
    """The session's stop reason, one line: which gate, its timeout's first line, what was left out."""
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    return (f"gate {test} failed for a timeout ({first[:200]}); the {not_run} test(s) after it need what it "
            "sets up and were not run")
