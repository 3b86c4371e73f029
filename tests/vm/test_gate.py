"""A guest's gate test that fails for a timeout ends the guest's session with that reason,
and the reason comes back to the host (tests/vm/gate.py, tests/vm/guest/conftest.py,
tests/vm/progress.py). Run here in a pytest session of its own, as the guest runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.vm.progress import read_progress

pytest_plugins = ("pytester",)

CONFTEST = "from tests.vm.guest.conftest import pytest_configure, pytest_runtest_makereport  # noqa: F401\n"

GUEST_TESTS = """
import subprocess, time, pytest
from tests.vm.gate import GuestTimeout

@pytest.mark.vm_gate
@pytest.mark.timeout(1)
def test_start():
    {gate_body}

def test_after_1():
    pass

def test_after_2():
    pass
"""


def run_guest(pytester: pytest.Pytester, gate_body: str) -> tuple[pytest.RunResult, Path]:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_guest=GUEST_TESTS.format(gate_body=gate_body))
    progress = pytester.path / "progress.jsonl"
    result = pytester.runpytest("-p", "tests.vm.progress", f"--vm-progress={progress}", "-p", "no:cacheprovider")
    return result, progress


@pytest.mark.parametrize("body", [
    'raise GuestTimeout("systemctl start hwagent: Job for hwagent.service failed because a timeout was exceeded.")',
    'raise subprocess.TimeoutExpired(["systemctl", "start", "hwagent"], 300)',
    'time.sleep(30)',  # pytest-timeout ends it (its own words: "Timeout (>1.0s) from pytest-timeout.")
])
def test_a_gate_that_times_out_stops_the_session_with_the_reason(pytester: pytest.Pytester, body: str) -> None:
    result, progress = run_guest(pytester, body)
    result.assert_outcomes(failed=1)  # the two tests after it never ran
    result.stdout.fnmatch_lines(["*Interrupted: gate test_guest.py::test_start failed for a timeout*"])
    got = read_progress(progress)
    assert got is not None and got.collected == 3 and got.finished == 1
    assert got.stopped is not None and "the 2 test(s) after it" in got.stopped
    assert "stopped early: gate test_guest.py::test_start failed for a timeout" in got.report()


def test_a_gate_failing_for_another_reason_lets_the_rest_run(pytester: pytest.Pytester) -> None:
    result, progress = run_guest(pytester, 'assert prop == "notify", "wrong Type"'.replace("prop", "'simple'"))
    result.assert_outcomes(failed=1, passed=2)
    got = read_progress(progress)
    assert got is not None and got.stopped is None
