"""Ending background tasks the same way everywhere.

A component's stop cancels its tasks and waits until they have really ended, so
nothing of it runs once stop returns. Whatever a task raised on its way out has
already been logged by the task or does not matter at shutdown, so it is not
raised again here; a cancellation of the caller itself still propagates, which a
bare ``try: await task except CancelledError: pass`` would swallow.
"""

from __future__ import annotations

import asyncio

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(*tasks: asyncio.Future | None) -> None:
    """Cancel each task given (None and finished ones are skipped) and wait for all of them."""
    live = [t for t in tasks if t is not None]
    for t in live:
        t.cancel()
    if live:
        await asyncio.gather(*live, return_exceptions=True)
