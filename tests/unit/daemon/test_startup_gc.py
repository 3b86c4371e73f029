"""Start-up runs no automatic full collection: a restart that restores thousands of pods
re-walked all of them in each one and freed nothing (issue 37 item 17). The one full
collection comes after READY (``freeze_startup_heap``), and the thresholds are put back."""

from __future__ import annotations

import gc
from pathlib import Path

from agent.contracts import DaemonContext
from agent.daemon.daemon import EXIT_FAILED, EXIT_OK
from tests.unit.daemon import fake_components as fc
from tests.unit.daemon.test_daemon import make_daemon, run_daemon

HERE = "tests.unit.daemon.test_startup_gc"
FAKES = "tests.unit.daemon.fake_components"
#: what the restoring component holds, as a component holds its restored state for the process's life
HELD: list[object] = []


class Restoring(fc.Fake):
    """Restores a large state at start: 400,000 container objects that live on."""

    async def start(self, ctx: DaemonContext) -> None:
        HELD.extend([i, str(i)] for i in range(400_000))
        await super().start(ctx)


def restoring(ctx: DaemonContext) -> Restoring:
    return Restoring("restoring")


def _full_collections_while(daemon, phases: tuple[str, ...]) -> list[int]:
    """Starts a callback that notes each full collection made while ``daemon.phase`` is one of ``phases``."""
    seen: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2 and daemon.phase in phases:
            seen.append(1)

    gc.callbacks.append(note)
    return seen


def test_no_full_collection_before_ready_and_thresholds_back_after(tmp_path: Path) -> None:
    d = make_daemon(tmp_path, (f"{HERE}:restoring", f"{FAKES}:alpha"))
    before = gc.get_threshold()
    seen = _full_collections_while(d, ("new", "starting"))
    try:
        code, during = run_daemon(d, lambda d: gc.get_threshold())
    finally:
        gc.callbacks.pop()
        HELD.clear()
    assert code == EXIT_OK
    assert seen == []  # before the fix: full collections while 400,000 objects were restored
    assert during == before and gc.get_threshold() == before


def test_a_start_that_fails_puts_the_thresholds_back(tmp_path: Path) -> None:
    d = make_daemon(tmp_path, (f"{HERE}:restoring", f"{FAKES}:broken"))
    before = gc.get_threshold()
    try:
        code, _ = run_daemon(d)
    finally:
        HELD.clear()
    assert code == EXIT_FAILED
    assert gc.get_threshold() == before
