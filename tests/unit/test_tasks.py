"""cancel_and_wait: a stop that returns has nothing of the component still running."""

from __future__ import annotations

import asyncio

import pytest

from agent.tasks import cancel_and_wait


def test_cancels_and_waits_until_each_task_has_ended():
    async def go():
        ended = []

        async def worker(name):
            try:
                await asyncio.Event().wait()
            finally:
                await asyncio.sleep(0.01)  # clean-up that itself awaits
                ended.append(name)

        a, b = asyncio.create_task(worker("a")), asyncio.create_task(worker("b"))
        await asyncio.sleep(0)
        await cancel_and_wait(a, None, b)
        assert sorted(ended) == ["a", "b"] and a.cancelled() and b.cancelled()

    asyncio.run(go())


def test_a_task_that_failed_or_finished_is_not_raised_again():
    async def go():
        async def boom():
            raise RuntimeError("already logged by its owner")

        failed = asyncio.create_task(boom())
        done = asyncio.create_task(asyncio.sleep(0))
        await asyncio.sleep(0.01)
        await cancel_and_wait(failed, done)
        await cancel_and_wait()
        assert isinstance(failed.exception(), RuntimeError)

    asyncio.run(go())


def test_the_callers_own_cancellation_still_propagates():
    async def go():
        async def stubborn():
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await asyncio.sleep(30)  # slow to end

        inner = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        stopper = asyncio.create_task(cancel_and_wait(inner))
        await asyncio.sleep(0.01)
        stopper.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopper
        inner.cancel()
        await asyncio.gather(inner, return_exceptions=True)

    asyncio.run(go())
