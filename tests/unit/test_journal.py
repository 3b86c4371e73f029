"""agent.journal: group commit (one fdatasync for every record waiting, each
caller answered after the sync holding its record), compaction into a new
snapshot with rotation, snapshots on request, resume without rewriting."""

from __future__ import annotations

import asyncio
import json
import os
import threading

from agent.journal import Journal, StateCorrupt


class ListCodec:
    def empty(self):
        return []

    def decode_snapshot(self, raw):
        try:
            d = json.loads(raw)
            return list(d["items"]), int(d["seq"])
        except (ValueError, KeyError, TypeError) as e:
            raise StateCorrupt(str(e)) from None

    def encode_snapshot(self, state, seq):
        return json.dumps({"items": list(state), "seq": seq}).encode()

    def apply(self, state, payload):
        state.append(int(payload))
        return state


def _open(path, **kw):
    j = Journal(path, ListCodec(), **kw)
    items = j.recover().state
    j.start(list(items), capture=lambda: list(items))
    return j, items


def _recovered(path):
    j = Journal(path, ListCodec())
    try:
        return j.recover()
    finally:
        j.close_sync()


def test_records_waiting_during_a_sync_share_the_next_one(tmp_path, monkeypatch):
    release = threading.Event()
    entered = threading.Event()
    real = os.fdatasync
    calls = []

    def slow_sync(fd):
        calls.append(fd)
        if len(calls) == 1:
            entered.set()
            release.wait(10)
        real(fd)

    async def main():
        j, items = _open(tmp_path / "s.json")
        monkeypatch.setattr(os, "fdatasync", slow_sync)
        items.append(0)
        first = j.append(b"0")
        while not entered.is_set():
            await asyncio.sleep(0.001)
        later = []
        for v in range(1, 11):
            items.append(v)
            later.append(j.append(str(v).encode()))
        await asyncio.sleep(0.05)
        assert not first.done() and not any(f.done() for f in later)  # nobody answered before its sync
        release.set()
        await first
        await asyncio.gather(*later)
        assert j.syncs == 2 and j.records == 11  # 1 + 10 records, two fdatasyncs
        await j.close()

    asyncio.run(main())
    assert _recovered(tmp_path / "s.json").state == list(range(11))


def test_compaction_rotates_snapshots_and_drops_the_old_journal(tmp_path):
    path = tmp_path / "s.json"

    async def main():
        j, items = _open(path, compact_bytes=512)
        for v in range(200):
            items.append(v)
            await j.append(str(v).encode())
        await j.drain()
        assert j.snapshots >= 1
        assert not (tmp_path / "s.json.wal.1").exists()
        assert (tmp_path / "s.json.wal").stat().st_size < 512 + 64
        await j.close()

    asyncio.run(main())
    rec = _recovered(path)
    assert rec.state == list(range(200)) and rec.snapshot_seq > 0 and rec.problems == []


def test_snapshot_on_request_and_resume_without_rewrite(tmp_path):
    path = tmp_path / "s.json"

    async def main():
        j, items = _open(path)
        for v in range(5):
            items.append(v)
            await j.append(str(v).encode())
        j.request_snapshot()
        await j.drain()
        assert json.loads(path.read_bytes()) == {"items": [0, 1, 2, 3, 4], "seq": 5}
        await j.close()

    asyncio.run(main())
    before = path.read_bytes()

    async def again():
        j = Journal(path, ListCodec())
        items = j.recover().state
        j.resume(capture=lambda: list(items))
        items.append(5)
        await j.append(b"5")
        await j.close()

    asyncio.run(again())
    assert path.read_bytes() == before  # resumed: appended, snapshot untouched
    assert _recovered(path).state == list(range(6))


def test_barrier_waits_for_pending_records(tmp_path):
    async def main():
        j, items = _open(tmp_path / "s.json")
        items.append(1)
        fut = j.append(b"1")
        await j.barrier()
        assert fut.done() and j.durable_seq == 1
        await j.barrier()  # nothing pending: returns at once
        await j.close()

    asyncio.run(main())


def test_a_plain_append_is_answered_from_the_io_threads_own_callback(tmp_path):
    """Issue 24: the commit path costs one hand-off to the journal's I/O thread and one back.
    No executor call, no writer task and no extra loop step between the sync and its caller:
    the thread's ``call_soon_threadsafe`` callback itself resolves the caller's future."""
    seen: list[str] = []

    async def main():
        loop = asyncio.get_running_loop()
        j, items = _open(tmp_path / "s.json")

        def no_executor(*a, **kw):
            raise AssertionError("the commit path went through run_in_executor")

        def count_tasks(loop, coro, **kw):
            seen.append(getattr(coro, "__qualname__", repr(coro)))
            return asyncio.Task(coro, loop=loop, **kw)

        loop.run_in_executor = no_executor  # type: ignore[method-assign]
        loop.set_task_factory(count_tasks)
        real = loop.call_soon_threadsafe
        resolved_in_callback = []

        def watch(cb, *args, **kw):  # the one hop back: the caller's future is done when it returns
            def run(*a):
                cb(*a)
                resolved_in_callback.append(fut.done())
            return real(run, *args, **kw)

        loop.call_soon_threadsafe = watch  # type: ignore[method-assign]
        for v in range(20):
            items.append(v)
            fut = j.append(str(v).encode())
            await fut
        loop.call_soon_threadsafe = real  # type: ignore[method-assign]
        loop.set_task_factory(None)
        del loop.run_in_executor
        assert j.syncs == 20 and j.records == 20
        assert resolved_in_callback == [True] * 20
        await j.close()

    asyncio.run(main())
    assert seen == []  # not one task per idle-to-busy turn
    assert _recovered(tmp_path / "s.json").state == list(range(20))


def test_recovery_and_each_snapshot_hand_freed_memory_back(tmp_path, monkeypatch):
    """Issue 24: glibc kept the freed text of a restore and of each compaction (34 MB in
    a 10,000-pod daemon after its first one); the journal returns it after each."""
    import agent.journal as journal_mod

    trims: list[str] = []
    monkeypatch.setattr(journal_mod, "release_freed_memory",
                        lambda: trims.append(threading.current_thread().name) or True)
    path = tmp_path / "s.json"

    async def main():
        j, items = _open(path)
        assert len(trims) == 1  # recover
        items.append(1)
        await j.append(b"1")
        assert len(trims) == 1  # a record is no snapshot
        j.request_snapshot()
        await j.drain()
        assert len(trims) == 2
        await j.close()

    asyncio.run(main())
