"""Each guest test's outcome as it finishes, so a guest cut at its time limit still says
what passed, what failed and what was running.

Why: pytest writes its junit XML only when the session ends, and a guest killed at its
limit (a loaded host makes TCG slow) never gets there; the host then knew nothing of the
hour it had run. The guest's pytest loads this module as a plugin
(``-p tests.vm.progress --vm-progress=/out/progress.jsonl``, see
``runner.guest_pytest_command``); it appends one JSON line per event to that file on the
host's 9p share and fsyncs it, so whatever reached the host before the kill is readable.
The host reads it back with :func:`read_progress` and words it with
:func:`Progress.report`. One module holds both sides so that the format lives in one place.

Lines: ``{"event": "session", "t": ..., "collected": N}`` once collection is done,
``{"event": "start", "t": ..., "test": ID}`` as a test begins, and
``{"event": "end", "t": ..., "test": ID, "outcome": ..., "reason": ..., "duration": S}``
after its teardown. Outcomes: passed, failed (the test body), error (setup or teardown),
skipped (skip and xfail). ``{"event": "stopped", "t": ..., "reason": ...}`` when the
session was stopped before its end (a gate test that failed for a timeout,
tests/vm/gate.py). ``t`` is the guest's clock, used only for differences.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the file's name under the guest's /out (the host's artifacts directory)
PROGRESS_FILE = "progress.jsonl"
#: a reason is cut to this many characters: the report names, the serial log explains
REASON_CHARS = 300


# --- guest side: the pytest plugin ---------------------------------------------------------


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--vm-progress", default=None,
                     help="append each test's outcome, as it finishes, to this file (JSON lines, fsynced)")


def pytest_configure(config: Any) -> None:
    path = config.getoption("--vm-progress")
    if path:
        config.pluginmanager.register(_Writer(Path(path)), "vm-progress-writer")


def short_reason(report: Any) -> str:
    """One line for a report: the crash message of a failure, the reason of a skip."""
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, lineno, reason)
        text = str(longrepr[2])
    else:
        text = getattr(getattr(longrepr, "reprcrash", None), "message", None) or ""
        if not text:  # a plain-string longrepr (a collection or internal error): its last line
            lines = str(longrepr).strip().splitlines()
            text = lines[-1] if lines else ""
    text = " ".join(str(text).split())
    return text.removeprefix("Skipped: ")[:REASON_CHARS]


def outcome_of(reports: list[Any]) -> tuple[str, str]:
    """A test's one outcome from its setup/call/teardown reports: the first failing phase
    decides (failed for the call, error for setup or teardown), then a skip or xfail."""
    for r in reports:
        if r.failed:
            return ("failed" if r.when == "call" else "error"), short_reason(r)
    for r in reports:
        if r.skipped:
            xfail = getattr(r, "wasxfail", None)
            return "skipped", (f"xfail: {xfail}" if xfail is not None else short_reason(r))
    return "passed", ""


class _Writer:
    """Appends and fsyncs one line per event; a write that fails is given up on quietly
    (the junit XML and the console still report), never failing the tests themselves."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._reports: dict[str, list[Any]] = {}

    def _emit(self, **fields: Any) -> None:
        line = json.dumps({"t": round(time.time(), 3), **fields}) + "\n"
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            pass

    def pytest_collection_finish(self, session: Any) -> None:
        self._emit(event="session", collected=len(session.items))

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:  # noqa: ARG002
        self._reports[nodeid] = []
        self._emit(event="start", test=nodeid)

    def pytest_runtest_logreport(self, report: Any) -> None:
        self._reports.setdefault(report.nodeid, []).append(report)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:  # noqa: ARG002
        reports = self._reports.pop(nodeid, [])
        outcome, reason = outcome_of(reports)
        self._emit(event="end", test=nodeid, outcome=outcome, reason=reason,
                   duration=round(sum(getattr(r, "duration", 0.0) for r in reports), 2))

    def pytest_sessionfinish(self, session: Any) -> None:
        if isinstance(session.shouldstop, str) and session.shouldstop:
            self._emit(event="stopped", reason=session.shouldstop)


# --- host side: read it back -------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """What the guest's pytest had reported when the file was read."""

    #: tests pytest collected (None: the session line never came)
    collected: int | None
    passed: tuple[str, ...]
    #: (test id, outcome and short reason) of each failed test and each error
    failed: tuple[tuple[str, str], ...]
    skipped: tuple[tuple[str, str], ...]
    #: the test that had started and not finished (the one a cut interrupted)
    running: str | None
    #: guest seconds from the session line to the running test's start
    running_started_s: float | None
    #: guest seconds from the session line to the last line read
    last_event_s: float | None
    #: why the session stopped before running every test (tests/vm/gate.py), if it did
    stopped: str | None = None

    @property
    def finished(self) -> int:
        return len(self.passed) + len(self.failed) + len(self.skipped)

    def report(self) -> str:
        """The partial result in words: counts, each failure with its reason, the running test."""
        of = f" of {self.collected}" if self.collected is not None else ""
        lines = [f"{self.finished}{of} guest tests finished: {len(self.passed)} passed, "
                 f"{len(self.failed)} failed, {len(self.skipped)} skipped"]
        lines += [f"  FAILED {test}: {why}" for test, why in self.failed]
        if self.stopped is not None:
            lines.append(f"  stopped early: {self.stopped}")
        elif self.running is not None:
            when = f" (started {self.running_started_s:.0f}s into the guest's session)" \
                if self.running_started_s is not None else ""
            lines.append(f"  running when cut: {self.running}{when}")
        elif self.collected is not None and self.finished >= self.collected:
            lines.append("  every test had finished; pytest was still ending the session")
        else:
            lines.append("  no test running when cut (between tests, or still collecting)")
        return "\n".join(lines)


def read_progress(path: Path) -> Progress | None:
    """The guest's progress file, or None when there is none (pytest never started).

    A line that does not parse is skipped: the last one may be torn by the kill."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    collected: int | None = None
    stopped: str | None = None
    session_t: float | None = None
    last_t: float | None = None
    started: dict[str, float] = {}
    outcomes: dict[str, tuple[str, str]] = {}
    for raw in text.splitlines():
        try:
            ev = json.loads(raw)
            kind, t = ev["event"], float(ev["t"])
        except (ValueError, KeyError, TypeError):
            continue
        last_t = t
        if kind == "session":
            collected, session_t = int(ev.get("collected", 0)), t
        elif kind == "start":
            started[str(ev["test"])] = t
        elif kind == "stopped":
            stopped = str(ev.get("reason", ""))
        elif kind == "end":
            test = str(ev["test"])
            started.pop(test, None)
            outcomes[test] = (str(ev.get("outcome", "failed")), str(ev.get("reason", "")))
    running, running_t = next(reversed(started.items()), (None, None))

    def since(t: float | None) -> float | None:
        return None if t is None or session_t is None else t - session_t

    return Progress(
        collected,
        tuple(t for t, (o, _) in outcomes.items() if o == "passed"),
        tuple((t, f"{o}: {r}" if r else o) for t, (o, r) in outcomes.items() if o in ("failed", "error")),
        tuple((t, r) for t, (o, r) in outcomes.items() if o == "skipped"),
        running, since(running_t), since(last_t), stopped,
    )
