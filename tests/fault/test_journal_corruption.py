"""A torn journal tail (every truncation offset, a bit flip in the last
record): recovery stops cleanly at the last good record, keeps the rest aside,
reports it, cuts the journal there, and the next append follows the good
records. A bad record with whole records after it (every position, flips,
garbage, gaps, a length past the end) is corruption: refused, or with the
owner's acceptance kept aside whole, never silently shortened. Corrupt snapshots are refused (or given up with their journal when
the owner accepts the loss). Stale temp files are removed at start."""

from __future__ import annotations

import asyncio
import os

import pytest

from agent.journal import HEADER, Journal, JournalCorrupt, frame, parse_frames
from tests.fault.conftest import COUNTS

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
    """A flip in the last record reads as a torn tail (cut, prefix kept); a flip
    anywhere before it has whole records after it: refused, never shortened."""
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
            hit = max(i for i, b in enumerate(bounds) if b <= off)  # the record holding the flipped byte
            if hit == N - 1:
                rec = _recover(d / "s.json", read_only=True)
                assert rec.state == list(range(hit)), (off, bit)  # a prefix, never a changed value
                assert rec.problems, (off, bit)
            else:
                with pytest.raises(JournalCorrupt, match="corrupt in the middle"):
                    _recover(d / "s.json", read_only=True)
            detected += 1
            assert (d / "s.json.wal").read_bytes() == bytes(bad)  # read_only: nothing touched
    assert detected == 2 * len(wal_raw)


def _damages(raw: bytes, bounds: list[int], k: int, rng):
    """Ways to damage record ``k`` (of several) and leave the records after it whole."""
    start, end = bounds[k], bounds[k + 1]
    hs = HEADER.size

    def flip(i: int) -> bytes:
        b = bytearray(raw)
        b[i] ^= 1 << rng.randrange(8)
        return bytes(b)

    yield "flip magic", flip(start)
    yield "flip length", flip(start + 4)
    yield "flip crc", flip(start + 8)
    yield "flip seq", flip(start + 12)
    yield "flip payload", flip(start + hs + rng.randrange(end - start - hs))
    yield "garbage over the record", raw[:start] + bytes(rng.randrange(256) for _ in range(end - start)) + raw[end:]
    yield "zeros over the record", raw[:start] + bytes(end - start) + raw[end:]
    long = bytearray(raw)
    long[start + 4:start + 8] = (len(raw) * 2).to_bytes(4, "little")  # a length that runs past the end
    yield "length past the end", bytes(long)
    yield "record missing (a gap)", raw[:start] + raw[end:]
    yield "garbage inserted", raw[:start] + b"\x00garbage\xff" + raw[start:]
    yield "refused content", raw[:start] + frame(k + 1, b"not-an-int") + raw[end:]


def test_mid_journal_corruption_at_every_record_is_refused_or_kept_aside_never_shortened(tmp_path):
    """Issue 22 item 1: a bad record with valid records after it is corruption,
    not a torn tail: without ``accept_loss`` recovery refuses and touches no file;
    with it, snapshot and journal are kept aside whole and the state starts empty.
    Never the records before the bad one alone (that drops acknowledged changes)."""
    import random

    rng = random.Random(22)
    n = 12
    base = tmp_path / "base"
    base.mkdir()
    _write(base / "s.json", range(n))
    wal_raw = (base / "s.json.wal").read_bytes()
    snap_raw = (base / "s.json").read_bytes()
    bounds = _boundaries(wal_raw)
    trials = 0
    for k in range(n - 1):  # every record that has a whole record after it
        for what, bad in _damages(wal_raw, bounds, k, rng):
            d = tmp_path / f"r{k}-{trials}"
            d.mkdir()
            (d / "s.json").write_bytes(snap_raw)
            (d / "s.json.wal").write_bytes(bad)
            with pytest.raises(JournalCorrupt, match="corrupt in the middle") as e:
                _recover(d / "s.json")
            assert "s.json.wal" in str(e.value), (k, what)
            assert sorted(p.name for p in d.iterdir()) == ["s.json", "s.json.wal"], (k, what)
            assert (d / "s.json.wal").read_bytes() == bad, (k, what)  # refused: untouched
            rec = _recover(d / "s.json", accept_loss=True)
            assert rec.state == [] and rec.snapshot_discarded and rec.problems, (k, what)
            kept = sorted(p.name.split(".corrupt-")[0] for p in d.iterdir())
            assert kept == ["s.json", "s.json.wal"] and len(rec.kept_aside) == 2, (k, what, kept)
            aside = {p.name.split(".corrupt-")[0]: p.read_bytes() for p in rec.kept_aside}
            assert aside == {"s.json": snap_raw, "s.json.wal": bad}, (k, what)  # kept whole, as evidence
            trials += 1
    COUNTS["journal mid-record corruption: trials (refused, then kept aside)"] += trials
    assert trials == (n - 1) * 11


def test_a_torn_rotated_journal_with_records_after_it_is_corruption(tmp_path):
    """``.wal.1`` is rotated only at a batch boundary: a bad spot in it followed
    by later records in ``.wal`` is corruption, not a crash mid-append."""
    base = tmp_path / "base"
    base.mkdir()
    _write(base / "s.json", range(6))
    raw = (base / "s.json.wal").read_bytes()
    snap = (base / "s.json").read_bytes()
    bounds = _boundaries(raw)
    d = tmp_path / "d"
    d.mkdir()
    (d / "s.json").write_bytes(snap)
    (d / "s.json.wal.1").write_bytes(raw[:bounds[3] - 2])  # record 3 torn
    (d / "s.json.wal").write_bytes(raw[bounds[3]:])  # records 4..6 whole
    with pytest.raises(JournalCorrupt, match="record 4 from there on is whole"):
        _recover(d / "s.json")
    # a torn rotated journal with nothing verifiable behind it is a tail: cut, the rest kept aside
    (d / "s.json.wal").write_bytes(b"HWJ1 torn")
    rec = _recover(d / "s.json")
    assert rec.state == [0, 1] and "torn" in rec.problems[0] and len(rec.kept_aside) == 2


def test_a_file_gone_before_its_set_aside_does_not_fail_recovery(tmp_path, monkeypatch):
    """Issue 22 item 12: a set-aside that finds no file keeps nothing and goes on."""
    import agent.statefile as statefile

    path = tmp_path / "s.json"
    _write(path, [1, 2])
    path.write_bytes(b"{torn")
    real_link = os.link

    def link_after_the_wal_vanished(src, dst, **kw):
        if str(src).endswith(".wal"):
            os.unlink(src)  # what a second set-aside (or a late writer) would have done
        return real_link(src, dst, **kw)

    monkeypatch.setattr(statefile.os, "link", link_after_the_wal_vanished)
    rec = _recover(path, accept_loss=True)
    assert rec.snapshot_discarded and rec.state == []
    assert [p.name.split(".corrupt-")[0] for p in rec.kept_aside] == ["s.json"]


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
