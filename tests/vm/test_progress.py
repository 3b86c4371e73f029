"""The guest's per-test progress file (tests/vm/progress.py), without qemu: a real pytest
with the plugin, killed -9 in the middle of a test as qemu is at a guest's limit, leaves a
file from which the host reads what passed, what failed and why, and what was running."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.vm.progress import read_progress
from tests.vm.runner import REPO

SAMPLE = textwrap.dedent('''
    import os, signal
    import pytest

    @pytest.fixture
    def broken_setup():
        raise RuntimeError("no cgroup v2 here")

    @pytest.fixture
    def broken_teardown():
        yield
        raise OSError("rmdir: busy")

    def test_ok():
        pass

    def test_wrong():
        assert 1 + 1 == 3, "arithmetic"

    def test_skip():
        pytest.skip("needs two NUMA nodes")

    @pytest.mark.xfail(reason="known torn snapshot")
    def test_known():
        assert False

    def test_setup(broken_setup):
        pass

    def test_teardown(broken_teardown):
        pass

    def test_cut():
        os.kill(os.getpid(), signal.SIGKILL)

    def test_never_reached():
        pass
''')


def run_sample(tmp_path: Path) -> tuple[int, Path]:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    out = tmp_path / "progress.jsonl"
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "/dev/null",
         "--rootdir", str(tmp_path), "-p", "tests.vm.progress", f"--vm-progress={out}",
         str(tmp_path / "test_sample.py")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    return p.returncode, out


def test_a_session_killed_mid_test_leaves_what_passed_failed_and_was_running(tmp_path: Path) -> None:
    rc, out = run_sample(tmp_path)
    assert rc == -9  # killed, as qemu is: pytest never wrote its end of session
    progress = read_progress(out)
    assert progress is not None
    assert progress.collected == 8
    assert progress.passed == ("test_sample.py::test_ok",)
    failed = dict(progress.failed)
    assert set(failed) == {"test_sample.py::test_wrong", "test_sample.py::test_setup",
                           "test_sample.py::test_teardown"}
    assert failed["test_sample.py::test_wrong"].startswith("failed: AssertionError: arithmetic")
    assert failed["test_sample.py::test_setup"] == "error: RuntimeError: no cgroup v2 here"
    assert failed["test_sample.py::test_teardown"] == "error: OSError: rmdir: busy"
    assert dict(progress.skipped) == {"test_sample.py::test_skip": "needs two NUMA nodes",
                                      "test_sample.py::test_known": "xfail: known torn snapshot"}
    assert progress.running == "test_sample.py::test_cut"
    assert progress.running_started_s is not None and progress.running_started_s >= 0

    report = progress.report()
    assert report.splitlines()[0] == "6 of 8 guest tests finished: 1 passed, 3 failed, 2 skipped"
    assert "  FAILED test_sample.py::test_wrong: failed: AssertionError: arithmetic" in report
    assert "running when cut: test_sample.py::test_cut" in report


def test_a_torn_last_line_is_skipped_and_no_file_is_none(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    assert read_progress(path) is None
    lines = [{"event": "session", "t": 100.0, "collected": 3},
             {"event": "start", "t": 101.0, "test": "a"},
             {"event": "end", "t": 102.0, "test": "a", "outcome": "passed", "reason": ""},
             {"event": "start", "t": 103.5, "test": "b"}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"event": "end", "t": 10')
    progress = read_progress(path)
    assert progress is not None
    assert (progress.passed, progress.failed, progress.running) == (("a",), (), "b")
    assert progress.running_started_s == 3.5
    assert "running when cut: b (started 4s into the guest's session)" in progress.report()


def test_every_test_finished_is_said_so(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    lines = [{"event": "session", "t": 0, "collected": 1},
             {"event": "start", "t": 1, "test": "a"},
             {"event": "end", "t": 2, "test": "a", "outcome": "failed", "reason": "boom"}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    progress = read_progress(path)
    assert progress is not None and progress.running is None
    assert progress.failed == (("a", "failed: boom"),)
    assert "every test had finished" in progress.report()
