"""A torn or corrupt journal tail (every truncation offset, every bit flip):
recovery stops cleanly at the last good record, keeps the rest aside,
reports it, cuts the journal there, and the next append follows the good
records. Corrupt snapshots are refused (or given up with their journal when
the owner accepts the loss). Stale temp files are removed at start."""

from __future__ import annotations

import asyncio
import os

import pytest

from agent.journal import HEADER, Journal, JournalCorrupt, parse_frames

try:
    from .test_journal_kill import ListCodec
except ImportError:
    from test_journal_kill import ListCodec

pytestmark = pytest.mark.fault

N = 6


def _write(path, values):
    async def main():
        j = Journal(path, ListCodec())
        rec = j.recover()
        items = rec.state
        j.start(list(items), capture=lambda: list(items))
        for v in values:
            items.append(v)
            await j.append(str(v).encode())
        await j.close()

    asyncio.run(main())


def _recover(path, **kw):
    j = Journal(path, ListCodec())
    try:
        return j.recover(**kw)
    finally:
        j.close_sync()


def _boundaries(raw: bytes) -> list[int]:
    frames, _, _ = parse_frames(raw)
    return [0] + [end for _, _, end in frames]


def test_truncation_at_every_offset_stops_at_the_last_whole_record(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    _write(base / "s.json", range(100, 100 + N))
    wal_raw = (base / "s.json.wal").read_bytes()
    snap_raw = (base / "s.json").read_bytes()
    bounds = _boundaries(wal_raw)
    assert len(bounds) == N + 1
    for cut in range(len(wal_raw) + 1):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        (d / "s.json").write_bytes(snap_raw)
        (d / "s.json.wal").write_bytes(wal_raw[:cut])
        rec = _recover(d / "s.json")
        whole = max(i for i, b in enumerate(bounds) if b <= cut)
        assert rec.state == list(range(100, 100 + whole)), cut
        if cut in bounds:
            assert rec.problems == [] and rec.kept_aside == []
        else:
            assert len(rec.problems) == 1 and "torn" in rec.problems[0], (cut, rec.problems)
            (aside,) = rec.kept_aside
            assert aside.read_bytes() == wal_raw[bounds[whole]:cut]
            assert (d / "s.json.wal").read_bytes() == wal_raw[: bounds[whole]]
        # the journal continues after the good records
        _write(d / "s.json", [999])
        assert _recover(d / "s.json").state == list(range(100, 100 + whole)) + [999]


def test_bit_flips_anywhere_in_the_journal_are_detected(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    _write(base / "s.json", range(N))
    wal_raw = (base / "s.json.wal").read_bytes()
    snap_raw = (base / "s.json").read_bytes()
    bounds = _boundaries(wal_raw)
    detected = 0
    for off in range(len(wal_raw)):
        for bit in (0, 7):
            bad = bytearray(wal_raw)
            bad[off] ^= 1 << bit
            d = tmp_path / f"f{off}-{bit}"
            d.mkdir()
            (d / "s.json").write_bytes(snap_raw)
            (d / "s.json.wal").write_bytes(bytes(bad))
            rec = _recover(d / "s.json", read_only=True)
            hit = max(i for i, b in enumerate(bounds) if b <= off)  # the record holding the flipped byte
            assert rec.state == list(range(hit)), (off, bit)  # a prefix, never a changed value
            assert rec.problems, (off, bit)
            detected += 1
            assert (d / "s.json.wal").read_bytes() == bytes(bad)  # read_only: nothing touched
    assert detected == 2 * len(wal_raw)


def test_corrupt_snapshot_is_refused_or_given_up_with_its_journal(tmp_path):
    path = tmp_path / "s.json"
    _write(path, [1, 2, 3])
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(JournalCorrupt):
        _recover(path)
    assert path.exists()  # refused: nothing moved
    rec = _recover(path, accept_loss=True)
    assert rec.state == [] and rec.snapshot_discarded and len(rec.kept_aside) == 2  # snapshot and .wal
    assert not path.exists() and not (tmp_path / "s.json.wal").exists()


def test_a_record_out_of_sequence_stops_replay(tmp_path):
    path = tmp_path / "s.json"
    _write(path, [1, 2, 3])
    raw = (path.parent / "s.json.wal").read_bytes()
    bounds = _boundaries(raw)
    # the second record repeated after the third (a stale tail, as a broken cut could leave)
    dup = raw + raw[bounds[1]:bounds[2]]
    (path.parent / "s.json.wal").write_bytes(dup)
    rec = _recover(path)
    assert rec.state == [1, 2, 3] and "sequence" in rec.problems[0]


def test_stale_temp_files_are_removed_at_start(tmp_path):
    path = tmp_path / "s.json"
    _write(path, [1])
    for name in (".s.json.tmp-4242", ".s.json.tmp-99999", ".s.json.wal.tmp-4243"):
        (tmp_path / name).write_bytes(b"partial")
    (tmp_path / ".other.tmp-1").write_bytes(b"not ours")
    rec = _recover(path)
    assert rec.stale_temps_removed == 3 and rec.state == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.tmp-1", "s.json", "s.json.wal"]
    assert HEADER.size == 20 and os.path.getsize(tmp_path / "s.json.wal") == HEADER.size + 1
