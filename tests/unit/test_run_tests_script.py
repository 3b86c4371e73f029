"""scripts/run-tests.sh, the README's test command: the gate (ruff, mypy) runs before
pytest, a failing gate fails the run without stopping the suite, and the exit status
says what failed. Run against stand-in tools in a copy of the script's layout."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "run-tests.sh"

FAKE = """#!/bin/sh
echo "{name} ran $*" >> "$RUN_LOG"
exit "${{{var}:-0}}"
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "run-tests.sh")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, var in (("ruff", "RUFF_RC"), ("mypy", "MYPY_RC"), ("python", "PYTEST_RC")):
        tool = bin_dir / name
        tool.write_text(FAKE.format(name=name, var=var))
        tool.chmod(0o755)
    return tmp_path


def run(checkout: Path, **rcs: str) -> tuple[int, list[str], str]:
    log = checkout / "ran.log"
    env = {k: v for k, v in os.environ.items() if k != "HWAGENT_SKIP_GATE"}
    env.update(RUN_LOG=str(log), **rcs)
    p = subprocess.run(["bash", str(checkout / "scripts" / "run-tests.sh"), "-q", "tests/unit"],
                       env=env, capture_output=True, text=True, timeout=60)
    ran = log.read_text().splitlines() if log.exists() else []
    return p.returncode, ran, p.stderr


def test_gate_then_suite_and_success(checkout: Path) -> None:
    rc, ran, err = run(checkout)
    assert rc == 0, err
    assert ran == ["ruff ran check agent tests bench", "mypy ran ", "python ran -m pytest -q tests/unit"]
    assert "GATE FAILED" not in err


@pytest.mark.parametrize("failing", ["ruff", "mypy"])
def test_a_failing_gate_fails_the_run_but_the_suite_still_runs(checkout: Path, failing: str) -> None:
    rc, ran, err = run(checkout, **{f"{failing.upper()}_RC": "1"})
    assert rc == 1
    assert ran[-1] == "python ran -m pytest -q tests/unit"
    assert f"run-tests: GATE FAILED: {failing} " in err


def test_the_suites_own_failure_is_passed_through(checkout: Path) -> None:
    assert run(checkout, PYTEST_RC="2")[0] == 2
    assert run(checkout, PYTEST_RC="2", MYPY_RC="1")[0] == 2


def test_a_suite_that_collected_nothing_is_a_failure(checkout: Path) -> None:
    rc, _ran, err = run(checkout, PYTEST_RC="5")
    assert rc == 1 and "collected no tests" in err


def test_the_gate_can_be_skipped_for_a_local_subset(checkout: Path) -> None:
    rc, ran, err = run(checkout, HWAGENT_SKIP_GATE="1", RUFF_RC="1")
    assert rc == 0 and ran == ["python ran -m pytest -q tests/unit"]
    assert "gate skipped" in err
