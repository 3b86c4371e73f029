"""Many journalled changes, one wait.

An owner whose changes are journalled (the CPU policy's ``DurablePolicy``, the memory
manager) answers each change after the fdatasync that holds it (``agent.journal``). A
caller that makes many changes in a row for one request (NRI's ``Synchronize``: every
container the runtime has, placed as one reconciliation) would wait for N fdatasyncs one
after another, which at 1,000 containers is longer than the runtime waits. Inside
:func:`deferred` the owners queue each record and return at once; the caller awaits
:meth:`Deferred.settle` once, and the journal's group commit puts the records in one or a
few fdatasyncs.

What the caller gives up, and only it: its changes are seen (by itself and by readers)
before they are durable, as every read-only call already may. A record that cannot be made
durable is undone by its owner as always (with every change queued after it); ``settle``
returns the errors and the caller reads back what holds.

The scope belongs to the task that opened it (and the coroutines it awaits directly): a
task it starts inherits the context variable but not the scope, and every other caller on
the loop still waits for its own change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["Deferred", "defer", "deferred"]

class Deferred:
    """The records queued inside one :func:`deferred` scope."""

    def __init__(self) -> None:
        self.futures: list[asyncio.Future[None]] = []
        self.task = asyncio.current_task()

    async def settle(self) -> list[BaseException]:
        """Wait until every deferred record is durable or undone; the errors of those undone."""
        futs, self.futures = self.futures, []
        if not futs:
            return []
        res = await asyncio.gather(*futs, return_exceptions=True)
        return [r for r in res if isinstance(r, BaseException)]


_DEFERRED: ContextVar[Deferred | None] = ContextVar("hwagent_journal_deferred", default=None)


@contextmanager
def deferred() -> Iterator[Deferred]:
    """Owners' changes made in this task, inside the block, do not wait for their records."""
    d = Deferred()
    token = _DEFERRED.set(d)
    try:
        yield d
    finally:
        _DEFERRED.reset(token)


def defer(futures: list[asyncio.Future[None]]) -> bool:
    """Inside :func:`deferred`: keep ``futures`` for the caller's ``settle`` and say True (the
    owner answers now); outside it, False (the owner waits for them as usual)."""
    d = _DEFERRED.get()
    if d is None or d.task is not asyncio.current_task():
        return False
    d.futures.extend(futures)
    return True
