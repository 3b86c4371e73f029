"""The fault tier: hwagent under kill -9, corrupted state files and fuzzed gRPC.

Every test here carries the ``fault`` marker (``-m "not fault"`` skips the
tier, ``-m fault`` runs only it). The tier is bounded to a few minutes on a
two-core machine: each test has a fixed number of trials or requests, never a
"run until" loop. Counts (trials, requests, detected/total) are collected in
:data:`COUNTS` and printed in pytest's terminal summary, so a run's log can be
quoted.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from tests.fault.daemon import RunningDaemon

#: "test: what" -> number, printed at the end of the run
COUNTS: Counter[str] = Counter()

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.fault)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not COUNTS:
        return
    terminalreporter.section("fault tier counts")
    for key in sorted(COUNTS):
        terminalreporter.write_line(f"{key}: {COUNTS[key]}")


@pytest.fixture
def short_dir():
    """A short directory: unix socket paths under it must stay within 107 bytes."""
    d = Path(tempfile.mkdtemp(prefix="hwf-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def daemon_factory():
    started: list[RunningDaemon] = []

    def start(base: Path, **kw) -> RunningDaemon:
        d = RunningDaemon.start(base, **kw)
        started.append(d)
        return d

    yield start
    for d in started:
        d.cleanup()
