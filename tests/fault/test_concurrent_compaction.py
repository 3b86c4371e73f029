"""Concurrent snapshots of one journal (issue 22 item 3).

Every pod release in the device manager asks for a snapshot
(``flush_checkpoint`` -> ``compact_now``) while the journal's own writer may
be compacting by size or on request. Two snapshot writers of one file used to
run at once with one temp name: snapshots failed, and a reader (or a crash)
could meet a torn file. Hammered here with the product's ``Journal``: many
``compact_now`` at once, interleaved with appends and snapshot requests, and a
thread reading the snapshot the whole time. Every read must decode, no
snapshot may fail, and recovery must give exactly what memory held.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from agent.journal import Journal, StateCorrupt
from agent.statefile import write_atomic
from tests.fault.conftest import COUNTS
from tests.unit.test_journal import ListCodec

pytestmark = pytest.mark.fault

ROUNDS = 200
CONCURRENT = 4


class CountingCodec(ListCodec):
    """``ListCodec`` (state = the ints appended) with a padded snapshot, so that a
    write takes long enough for writers to overlap."""

    def encode_snapshot(self, state, seq):
        return json.dumps({"items": list(state), "seq": seq, "pad": "x" * 200_000}).encode()


def test_concurrent_compactions_never_tear_or_fail_a_snapshot(tmp_path, caplog):
    path = tmp_path / "state.json"
    reads = torn = 0
    stop = threading.Event()

    def reader() -> None:
        nonlocal reads, torn
        codec = CountingCodec()
        while not stop.is_set():
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                continue
            reads += 1
            try:
                codec.decode_snapshot(raw)
            except StateCorrupt:
                torn += 1

    async def main() -> tuple[list[int], Journal]:
        j: Journal = Journal(path, CountingCodec(), compact_bytes=4096)
        items: list[int] = j.recover().state
        j.start(list(items), capture=lambda: list(items))
        n = 0
        for _ in range(ROUNDS):
            ops = []
            for _ in range(CONCURRENT):
                items.append(n)
                ops.append(j.append(str(n).encode()))
                n += 1
                ops.append(j.compact_now())
            j.request_snapshot()
            await asyncio.gather(*ops)
        await j.compact_now()
        await j.close()
        return items, j

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        items, j = asyncio.run(main())
    finally:
        stop.set()
        t.join(30)
    failed = [r for r in caplog.records if "snapshot failed" in r.getMessage() or "rotate failed" in r.getMessage()]
    COUNTS["concurrent compaction: rounds"] += ROUNDS
    COUNTS["concurrent compaction: snapshots written"] += j.snapshots
    COUNTS["concurrent compaction: snapshot reads (torn)"] += reads
    COUNTS["concurrent compaction: torn reads"] += torn
    COUNTS["concurrent compaction: failed snapshots"] += len(failed) + j.failures
    assert j.failures == 0 and not failed, [r.getMessage() for r in failed]
    assert torn == 0, f"{torn} torn reads of {reads}"
    assert j.snapshots >= ROUNDS  # every compact_now was answered by a snapshot taken after it was asked
    check = Journal(path, CountingCodec())
    try:
        rec = check.recover()
    finally:
        check.close_sync()
    assert rec.state == items and not rec.problems
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no temp file, no journal left


def test_compact_now_waits_for_a_snapshot_taken_after_it_was_called(tmp_path):
    """A caller that asked for a snapshot gets one that holds its change, even
    when a snapshot was already being written when it asked."""
    path = tmp_path / "state.json"

    async def main() -> None:
        j: Journal = Journal(path, CountingCodec())
        items: list[int] = j.recover().state
        j.start(list(items), capture=lambda: list(items))
        first = asyncio.ensure_future(j.compact_now())
        await asyncio.sleep(0)  # the first snapshot is under way
        items.append(7)
        await j.append(b"7")
        await j.compact_now()
        raw = json.loads(path.read_bytes())
        assert raw["items"] == [7] and raw["seq"] == 1
        await first
        await j.close()

    asyncio.run(main())


def test_two_threads_replacing_one_file_never_collide(tmp_path):
    """``write_atomic`` from two threads at once: each rename lands a whole file
    (unique temp names), no writer fails, no temp file is left."""
    path = tmp_path / "f"
    errors: list[BaseException] = []
    payloads = [bytes([65 + i]) * 300_000 for i in range(2)]

    def writer(i: int) -> None:
        try:
            for _ in range(60):
                write_atomic(path, payloads[i])
                got = path.read_bytes()
                assert got in payloads, "torn file"
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors
    assert path.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["f"]
