"""Ending background tasks the same way everywhere, and running a periodic one.

A component's stop cancels its tasks and waits until they have really ended, so
nothing of it runs once stop returns. Whatever a task raised on its way out has
already been logged by the task or does not matter at shutdown, so it is not
raised again here; a cancellation of the caller itself still propagates, which a
bare ``try: await task except CancelledError: pass`` would swallow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from agent.eventlog import EventLogger

__all__ = ["cancel_and_wait", "run_every"]


async def cancel_and_wait(*tasks: asyncio.Future | None) -> None:
    """Cancel each task given (None and finished ones are skipped) and wait for all of them."""
    live = [t for t in tasks if t is not None]
    for t in live:
        t.cancel()
    if live:
        await asyncio.gather(*live, return_exceptions=True)


async def run_every(interval_s: Callable[[], float], step: Callable[[], Awaitable[object]],
                    log: EventLogger, what: str) -> None:
    """Await ``step()`` every ``interval_s()`` seconds (the first after one interval) until
    cancelled. A step that fails is logged ("periodic step failed", ``step=what``) with its
    traceback and the next one runs: one bad refresh must not end a component's periodic
    work. The interval is asked each time, so a reloaded config's interval applies from the
    next wait."""
    while True:
        await asyncio.sleep(interval_s())
        try:
            await step()
        except Exception:
            log.exception("periodic step failed", step=what)
