"""One dedicated thread that runs an owner's blocking I/O in order, answering on the loop.

Why: ``loop.run_in_executor`` costs a ``concurrent.futures.Future``, a wrapping
asyncio future and a task wake-up per call, and an awaiting coroutine adds one
more loop step before the callers it serves hear anything. The journal's commit
path (pwrite + fdatasync per batch) paid those hand-offs on every change, on a
2-core box under load a multiple of the sync itself (issue 24). Here a job goes
to the thread through one ``SimpleQueue.put`` and comes back through one
``loop.call_soon_threadsafe`` of the owner's own callback: one hop each way,
nothing else. Jobs run one at a time in submission order, so an owner's writes
never overlap.

Only the I/O runs here: ``done`` runs on the owner's loop, which keeps every
change to shared state on the one event loop.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["IOThread"]

Done = Callable[[Any, BaseException | None], None]


class IOThread:
    """Started on first use; ``shutdown`` lets it finish queued jobs and exit."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._q: queue.SimpleQueue[tuple[asyncio.AbstractEventLoop, Callable[[], Any], Done] | None] = (
            queue.SimpleQueue())
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, loop: asyncio.AbstractEventLoop, job: Callable[[], Any], done: Done) -> None:
        """Run ``job()`` on the thread, then ``done(result, error)`` on ``loop``."""
        if self._closed:
            raise RuntimeError(f"I/O thread {self.name} is shut down")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        self._q.put((loop, job, done))

    def run(self, job: Callable[[], Any]) -> asyncio.Future[Any]:
        """``job()`` on the thread as an awaitable (for the rare, slow steps)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()

        def done(result: Any, err: BaseException | None) -> None:
            if fut.done():  # the awaiting task was cancelled
                return
            if err is not None:
                fut.set_exception(err)
            else:
                fut.set_result(result)

        self.submit(loop, job, done)
        return fut

    def shutdown(self) -> None:
        """No new jobs; the thread ends after the queued ones."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._q.put(None)

    def _run(self) -> None:
        while (item := self._q.get()) is not None:
            loop, job, done = item
            result: Any = None
            err: BaseException | None = None
            try:
                result = job()
            except BaseException as e:  # noqa: BLE001 - handed to the owner on its loop
                err = e
            try:
                loop.call_soon_threadsafe(done, result, err)
            except RuntimeError:  # the loop is closed: nobody is left to answer
                pass
