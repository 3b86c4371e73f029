"""Write-ahead journal for durable state: snapshot + appended change records.

Why: rewriting a whole state file on every change costs a full encode and an
fsync of every byte the owner holds (30 ms at 1,000 containers); appending one
small record and ``fdatasync``-ing it costs the disk's flush alone, and
concurrent changes share one flush (group commit).

Files, beside the snapshot ``<dir>/<name>`` (the owner's state file):

- ``<name>``: the snapshot, written atomically (``agent.statefile.write_atomic``)
  in the owner's own format; it names the last journal sequence number it holds;
- ``<name>.wal``: records appended since; ``<name>.wal.1``: the journal before
  the last rotation, kept until the snapshot that covers it is on disk.

A record on disk is a 20-byte header ``b"HWJ1"``, payload length (u32), CRC-32
of seq + payload (u32), seq (u64, little endian), then the payload (the
owner's bytes, opaque here). Sequence numbers are contiguous from the
snapshot's; recovery replays ``.wal.1`` then ``.wal``, skipping records the
snapshot already holds, and stops at the first record that is torn, fails its
CRC, breaks the sequence or that the owner refuses (``StateCorrupt``).

Where it stopped decides what that means. A *torn tail* is what a crash during
an append leaves: bytes after the last whole record, none of which verifies as
a later record; such a record was never acknowledged, so the bytes are kept
aside as ``<file>.torn-<UTC time>``, reported, and the journal is cut there so
new records follow the last good one. A *corrupt journal* is a bad spot with
a record after it that does verify and carries a later sequence number (a
flipped bit in record 69 of 137, a length that runs past the end while whole
records follow, a verified record the owner refuses, a gap in the sequence):
cutting there would silently drop acknowledged changes, so it is treated as a
corrupt snapshot is: ``recover`` raises ``JournalCorrupt`` (the owner refuses
to start and says what to do), or with ``accept_loss`` keeps snapshot and
journals aside and starts empty. Stale records (a sequence number the state
already holds) after the good ones are a tail, not a loss. One case looks like
corruption and is not: a power loss on a file system that does not write data
in order can persist a later block of the last, unacknowledged batch before an
earlier one; that needs the operator's ``accept_loss`` too, which is the safe
side of the mistake. A record that was fully synced but whose caller was not yet
answered when the process died may survive the restart (as a kubelet's
checkpoint written just before a crash does): acknowledged means durable, not
the reverse.

The owner-facing API (one ``Journal`` per piece of state)::

    class MyCodec:                      # the owner's formats (JournalCodec)
        def empty(self) -> S: ...
        def decode_snapshot(self, raw: bytes) -> tuple[S, int]: ...  # (state, seq); raise StateCorrupt
        def encode_snapshot(self, state: S, seq: int) -> bytes: ...  # runs in a worker thread
        def apply(self, state: S, payload: bytes) -> S: ...          # replay; validate first, raise StateCorrupt

    j = Journal(directory / "state.json", MyCodec())
    rec = j.recover(accept_loss=False)   # blocking: run in an executor at start
    ...build the in-memory state from rec.state...
    j.start(state, capture=lambda: current_state)   # blocking: fresh snapshot, empty journal
    # (or j.resume(capture) to keep appending to what recover found)
    fut = j.append(payload, undo=revert_this_change)  # on the loop, right after the change in memory
    await fut            # resolves after the fdatasync that holds the record; JournalError if not
    await j.close()

``append`` must be called in the same loop step as the in-memory change it
describes, so that ``capture()`` (taken on the loop for snapshots) always
equals snapshot + every record appended so far. When a write or a sync fails,
the record and every record queued after it (built on it) fail: their
``undo`` callbacks run newest first on the loop, then their futures raise
``JournalError``; the journal is cut back to its last good size so disk and
memory both hold exactly what was acknowledged. If even the cut fails, the
next batch first rewrites the snapshot from ``capture()`` and starts an empty
journal. When the journal passes ``compact_bytes``, the state captured at a
batch boundary is written as a new snapshot in the background and the
journal before it is dropped.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from agent.eventlog import EventLogger, get_logger
from agent.iothread import IOThread
from agent.statefile import _fsync_dir, release_freed_memory, set_aside_if_present, temp_name, temp_owner, write_atomic

__all__ = [
    "HEADER",
    "Journal",
    "JournalCodec",
    "JournalCorrupt",
    "JournalError",
    "Recovered",
    "StateCorrupt",
    "first_later_record",
    "frame",
    "parse_frames",
    "remove_stale_temps",
]

log = get_logger("hwagent.journal")
S = TypeVar("S")

MAGIC = b"HWJ1"
HEADER = struct.Struct("<4sIIQ")
#: a record larger than this is refused on append and treated as corrupt on read
MAX_RECORD = 16 << 20


class StateCorrupt(ValueError):
    """Raised by a codec: bytes that cannot be trusted (syntax, checksum, meaning)."""


class JournalCorrupt(Exception):
    """The snapshot cannot be trusted and the caller did not accept the loss."""


class JournalError(OSError):
    """A change could not be made durable (write, sync or snapshot failed).
    Its change was undone; nothing of it is on disk."""


class JournalCodec(Protocol[S]):
    def empty(self) -> S: ...

    def decode_snapshot(self, raw: bytes) -> tuple[S, int]: ...

    def encode_snapshot(self, state: S, seq: int) -> bytes: ...

    def apply(self, state: S, payload: bytes) -> S: ...


@dataclass
class Recovered(Generic[S]):
    """What ``recover`` found: the state, how it was rebuilt, what was kept aside."""

    state: S
    seq: int = 0
    snapshot_seq: int = 0
    replayed: int = 0
    #: problems found (torn tail, corrupt record, corrupt snapshot), for the log and the operator
    problems: list[str] = field(default_factory=list)
    #: files written or moved aside as evidence
    kept_aside: list[Path] = field(default_factory=list)
    stale_temps_removed: int = 0
    #: the snapshot was corrupt and given up (``accept_loss``): the state is empty
    snapshot_discarded: bool = False


def frame(seq: int, payload: bytes) -> bytes:
    seq_b = seq.to_bytes(8, "little")
    return HEADER.pack(MAGIC, len(payload), zlib.crc32(payload, zlib.crc32(seq_b)), seq) + payload


def parse_frames(raw: bytes) -> tuple[list[tuple[int, bytes, int]], int, str | None]:
    """(records as (seq, payload, end offset), offset of the first bad byte,
    why it is bad or None when the whole buffer parsed)."""
    out: list[tuple[int, bytes, int]] = []
    off = 0
    n = len(raw)
    hs = HEADER.size
    while off < n:
        if n - off < hs:
            return out, off, f"torn record header at offset {off}"
        magic, length, crc, seq = HEADER.unpack_from(raw, off)
        if magic != MAGIC or length > MAX_RECORD:
            return out, off, f"bad record header at offset {off}"
        end = off + hs + length
        if end > n:
            return out, off, f"torn record at offset {off} ({n - off - hs} of {length} payload bytes)"
        payload = raw[off + hs:end]
        if zlib.crc32(payload, zlib.crc32(seq.to_bytes(8, "little"))) != crc:
            return out, off, f"record checksum mismatch at offset {off}"
        out.append((seq, payload, end))
        off = end
    return out, off, None


def first_later_record(buffers: list[bytes], after: int) -> int | None:
    """The sequence number of the first record in ``buffers`` (searched at every
    offset, not only at frame boundaries) that verifies and is newer than
    ``after``; None when there is none. A torn tail never holds one: a crash
    mid-append leaves a prefix of one batch's bytes, not a whole later record."""
    hs = HEADER.size
    for raw in buffers:
        pos = raw.find(MAGIC)
        while pos != -1:
            if len(raw) - pos >= hs:
                _, length, crc, seq = HEADER.unpack_from(raw, pos)
                end = pos + hs + length
                if (seq > after and length <= MAX_RECORD and end <= len(raw)
                        and zlib.crc32(raw[pos + hs:end], zlib.crc32(seq.to_bytes(8, "little"))) == crc):
                    return int(seq)
            pos = raw.find(MAGIC, pos + 1)
    return None


def remove_stale_temps(path: Path) -> int:
    """Remove ``.<name>.tmp-<pid>[-<serial>]`` files a killed writer left beside
    ``path`` (``statefile.temp_name``). Only at start, when no writer of ours runs."""
    n = 0
    try:
        candidates = list(path.parent.glob(f".{path.name}*.tmp-*"))
    except OSError:
        return 0
    for p in candidates:
        if temp_owner(p.name) == os.getpid():
            continue
        try:
            p.unlink()
            n += 1
        except FileNotFoundError:
            pass
    if n:
        log.warning("stale temp files removed", dir=path.parent, name=path.name, count=n)
    return n


@dataclass
class _Pending:
    seq: int
    data: bytes
    fut: asyncio.Future[None]
    undo: Callable[[], None] | None


class Journal(Generic[S]):
    """See the module docstring. Not thread-safe: one owner, one loop."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        codec: JournalCodec[S],
        *,
        compact_bytes: int = 4 << 20,
        logger: EventLogger | None = None,
        mode: int = 0o600,
    ) -> None:
        self.path = Path(path)
        self.wal = self.path.with_name(self.path.name + ".wal")
        self.old = self.path.with_name(self.path.name + ".wal.1")
        self.codec = codec
        self.compact_bytes = compact_bytes
        self.log = logger or log
        self.mode = mode
        self.seq = 0  # last seq appended (pending included)
        self.durable_seq = 0  # last seq on disk and acknowledged
        self.size = 0  # bytes of .wal known good
        self.syncs = 0  # fdatasyncs done (group-commit evidence)
        self.records = 0  # records made durable
        self.snapshots = 0  # snapshots written after start
        self.failures = 0
        self._fd: int | None = None
        self.capture: Callable[[], S] | None = None
        self._queue: list[_Pending] = []
        #: the batch being written by the fast path (plain appends), if any
        self._inflight: list[_Pending] = []
        self._kick_scheduled = False
        #: the slow path (reset, compaction, snapshot request) while it runs one round
        self._task: asyncio.Task[None] | None = None
        #: the one snapshot write in flight; only the writer task starts one, at a batch boundary
        self._compaction: asyncio.Task[None] | None = None
        #: snapshot requests made / the newest request a finished (or given-up) snapshot covers
        self._snap_requested = 0
        self._snap_covered = 0
        self._needs_reset = False
        self._snapshot_wanted = False
        self._last_fut: asyncio.Future[None] | None = None
        self._started = False
        self._closed = False
        self._io = IOThread(f"journal-{self.path.name}")

    # ------------------------------------------------------------------ recovery

    def recover(self, accept_loss: bool = False, read_only: bool = False) -> Recovered[S]:
        """Snapshot + replay. Blocking (call in an executor). Stale temp files
        are removed, a torn or corrupt tail is kept aside and cut off (unless
        ``read_only``: then files are left as they are, for tools reading
        while the daemon runs). A corrupt snapshot raises ``JournalCorrupt``
        unless ``accept_loss``: then snapshot and journals are kept aside and
        the state starts empty (records are deltas: without their snapshot
        they mean nothing)."""
        rec: Recovered[S] = Recovered(self.codec.empty())
        if not read_only:
            rec.stale_temps_removed = remove_stale_temps(self.path)
        if not self._recover_snapshot(rec, accept_loss, read_only):
            return rec
        rec.seq = rec.snapshot_seq
        files: list[tuple[Path, bytes]] = []
        for p in (self.old, self.wal):
            try:
                files.append((p, p.read_bytes()))
            except FileNotFoundError:
                continue
        for i, (p, data) in enumerate(files):
            bad_off, why = self._replay(rec, data)
            if why is None:
                continue
            later = [data[bad_off:]] + [d for _, d in files[i + 1:]]
            lost = first_later_record(later, rec.seq)
            if lost is not None:
                return self._journal_corrupt(rec, p, bad_off, why, lost, accept_loss, read_only)
            rec.problems.append(f"{p.name}: {why}; {len(data) - bad_off} bytes kept aside")
            if not read_only:
                rec.kept_aside.append(self._cut(p, data, bad_off))
                # a tail in .wal.1 with nothing verifiable after it: a .wal behind it holds only torn bytes
                rec.kept_aside.extend(a for q, _ in files[i + 1:] if (a := set_aside_if_present(q, "torn")))
            self.log.error("journal tail discarded", path=p, offset=bad_off, bytes=len(data) - bad_off, reason=why)
            break
        self.seq = self.durable_seq = rec.seq
        del files
        release_freed_memory()  # the files' bytes and their decoded JSON, freed
        return rec

    def _journal_corrupt(
        self, rec: Recovered[S], p: Path, off: int, why: str, lost: int, accept_loss: bool, read_only: bool,
    ) -> Recovered[S]:
        """A bad spot with a verifying later record after it: refuse, or give everything up."""
        what = (f"{p.name}: {why}; record {lost} from there on is whole (its checksum verifies), so the journal "
                f"is corrupt in the middle, not torn at its end: replaying only the records before it would drop "
                f"acknowledged changes")
        if not accept_loss:
            raise JournalCorrupt(f"{self.path}: {what}")
        out: Recovered[S] = Recovered(self.codec.empty(), problems=[what], snapshot_discarded=True,
                                      stale_temps_removed=rec.stale_temps_removed)
        if not read_only:
            out.kept_aside = self.set_aside_all()
            self.log.error("state journal corrupt", path=p, offset=off, first_lost=lost, reason=why,
                           kept_as=[str(k) for k in out.kept_aside], action="start_empty")
        return out

    def _recover_snapshot(self, rec: Recovered[S], accept_loss: bool, read_only: bool) -> bool:
        """Load the snapshot into ``rec`` (none: the empty state). False when it was corrupt and,
        with ``accept_loss``, given up: the state starts empty and no journal is replayed."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return True
        try:
            rec.state, rec.snapshot_seq = self.codec.decode_snapshot(raw)
        except StateCorrupt as e:
            if not accept_loss:
                raise JournalCorrupt(f"{self.path}: {e}") from None
            rec.problems.append(f"snapshot {self.path.name}: {e}")
            rec.snapshot_discarded = True
            if not read_only:
                rec.kept_aside = self.set_aside_all()
                self.log.error(
                    "state snapshot corrupt", path=self.path, kept_as=rec.kept_aside[0] if rec.kept_aside else None,
                    reason=str(e), action="start_empty",
                )
            return False
        return True

    def _replay(self, rec: Recovered[S], data: bytes) -> tuple[int, str | None]:
        """Apply one journal file's records after the snapshot to ``rec.state``, in sequence.
        Where it stops early: (offset of the first bad byte, why); else (_, None)."""
        frames, bad_off, why = parse_frames(data)
        for seq, payload, end in frames:
            if seq <= rec.snapshot_seq:
                continue
            if seq != rec.seq + 1:
                return end - HEADER.size - len(payload), f"sequence break (record {seq} after {rec.seq})"
            try:
                rec.state = self.codec.apply(rec.state, payload)
            except StateCorrupt as e:
                return end - HEADER.size - len(payload), f"record {seq} refused: {e}"
            rec.seq = seq
            rec.replayed += 1
        return bad_off, why

    def set_aside_all(self) -> list[Path]:
        """Keep snapshot and journals aside (state given up by its owner)."""
        return [a for p in (self.path, self.old, self.wal) if (a := set_aside_if_present(p))]

    def _cut(self, p: Path, data: bytes, off: int) -> Path:
        """Keep ``data[off:]`` aside as evidence and truncate ``p`` to ``off``."""
        aside, fd = self._create_aside(p)
        try:
            os.write(fd, data[off:])
            os.fsync(fd)
        finally:
            os.close(fd)
        fd = os.open(p, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, off)
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(p.parent)
        return aside

    def _create_aside(self, p: Path) -> tuple[Path, int]:
        """A new ``<name>.torn-<UTC stamp>[~n]`` beside ``p``, never an existing one; its path and fd."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        n = 0
        while True:
            aside = p.with_name(f"{p.name}.torn-{stamp}" + (f"~{n}" if n else ""))
            try:
                return aside, os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, self.mode)
            except FileExistsError:
                n += 1

    # ------------------------------------------------------------------ writing

    def start(self, state: S, capture: Callable[[], S] | None = None) -> None:
        """Write ``state`` as the snapshot (holding every record so far) and
        open an empty journal. Blocking; once, after ``recover``."""
        if capture is not None:
            self.capture = capture
        self._reset_sync(state, self.seq)

    def resume(self, capture: Callable[[], S] | None = None) -> None:
        """Keep appending to the journal as ``recover`` left it (cut at its
        last good record), without rewriting the snapshot: for owners whose
        recovered state is what they serve (a restart with 10,000 allocations
        then costs a read, not a rewrite). Blocking; once, after ``recover``."""
        if capture is not None:
            self.capture = capture
        existed = self.wal.exists()
        fd = os.open(self.wal, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, self.mode)
        self._fd, self.size, self._started = fd, os.fstat(fd).st_size, True
        if not existed:
            _fsync_dir(self.path.parent)

    def _reset_sync(self, state: S, seq: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, self.codec.encode_snapshot(state, seq), self.mode)
        self._open_fresh_wal()
        self.old.unlink(missing_ok=True)
        _fsync_dir(self.path.parent)
        self._needs_reset = False

    def _open_fresh_wal(self) -> None:
        tmp = self.wal.with_name(temp_name(self.wal.name))
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, self.mode)
        try:
            os.fsync(fd)
            os.replace(tmp, self.wal)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        old, self._fd = self._fd, fd
        self.size = 0
        self._started = True
        if old is not None:
            os.close(old)

    def append(self, payload: bytes, undo: Callable[[], None] | None = None) -> asyncio.Future[None]:
        """Queue one record (on the loop, in the step that changed memory).
        The future resolves once an fdatasync holding it returned; it raises
        ``JournalError`` after ``undo`` ran when the record could not be made
        durable. Never blocks."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if self._closed or not self._started:
            if undo is not None:
                undo()
            fut.set_exception(JournalError(f"journal {self.wal} is not open"))
            return fut
        if len(payload) > MAX_RECORD:
            if undo is not None:
                undo()
            fut.set_exception(JournalError(f"record of {len(payload)} bytes exceeds {MAX_RECORD}"))
            return fut
        self.seq += 1
        self._queue.append(_Pending(self.seq, frame(self.seq, payload), fut, undo))
        self._last_fut = fut
        if not self._kick_scheduled:
            # at the end of this loop step, so that every change made in it shares the batch
            self._kick_scheduled = True
            loop.call_soon(self._kick)
        return fut

    def _busy(self) -> bool:
        return bool(self._inflight) or (self._task is not None and not self._task.done())

    def _kick(self) -> None:
        """Start the next step when none is in flight (on the loop, between batches: memory
        then holds exactly snapshot + every record queued so far). Plain appends take the
        fast path: the batch goes to the I/O thread and ``_batch_done`` answers its callers
        straight from the thread's callback, one hand-off each way. A reset, a compaction or
        a snapshot request takes one round of the ``_writer`` coroutine, which kicks again."""
        self._kick_scheduled = False
        if self._busy() or not (self._queue or self._snapshot_wanted):
            return
        if self._queue and not self._needs_reset and not (self._wants_compaction() and self.capture is not None):
            batch, self._queue = self._queue, []
            self._inflight = batch
            data = batch[0].data if len(batch) == 1 else b"".join(p.data for p in batch)
            self._io.submit(asyncio.get_running_loop(), lambda: self._append_sync(data),
                            lambda _r, err: self._batch_done(batch, err))
            return
        self._task = asyncio.get_running_loop().create_task(self._writer())

    def _batch_done(self, batch: list[_Pending], err: BaseException | None) -> None:
        """The fast path's batch is on disk (or failed): answer its callers, start the next."""
        self._inflight = []
        if err is not None:
            self._fail(batch, err if isinstance(err, Exception) else OSError(str(err)))
        else:
            self._acknowledge(batch)
        self._kick()

    def _acknowledge(self, batch: list[_Pending]) -> None:
        self.durable_seq = batch[-1].seq
        self.records += len(batch)
        for p in batch:
            if not p.fut.done():
                p.fut.set_result(None)

    async def _writer(self) -> None:
        """The slow path, one round: a batch that needs a reset or starts a compaction, or a
        snapshot request with nothing queued. Only here are snapshots started, so that a
        snapshot's state is always captured when memory equals the disk and no two
        snapshots of one file are ever written at once."""
        try:
            await self._writer_round()
        finally:
            self._task = None
            if not self._closed:
                self._kick()

    async def _writer_round(self) -> None:
        batch, self._queue = self._queue, []
        if not batch:  # a snapshot asked for while nothing is queued: memory == disk now
            if not self._idle_compaction():
                assert self._compaction is not None
                await asyncio.wait([self._compaction])
                return  # records may have queued meanwhile: the next kick takes them first
            gen = self._take_snapshot_request()
            if self.capture is not None and not self._needs_reset:
                await self._start_compaction(self.capture(), self.durable_seq, gen)
            else:
                self._snapshot_covered(gen)
            return
        last = batch[-1].seq
        # memory now holds exactly snapshot + every record up to ``last``
        reset = self._needs_reset
        captured = None
        gen = 0
        if (reset or self._wants_compaction()) and self.capture is not None:
            captured = self.capture()
            gen = self._take_snapshot_request()
        try:
            if reset:
                if self._compaction is not None and not self._compaction.done():
                    await asyncio.wait([self._compaction])  # one snapshot writer at a time
                if captured is None:
                    raise JournalError("journal needs a new snapshot but its owner gave no capture")
                snap = captured
                await self._io.run(lambda: self._reset_sync(snap, last))
                self._snapshot_covered(gen)
            else:
                data = b"".join(p.data for p in batch)
                await self._io.run(lambda: self._append_sync(data))
        except Exception as e:  # noqa: BLE001 - every failure is reported to the callers
            if gen:
                self._snapshot_wanted = True  # the request still stands: a later boundary takes it
            self._fail(batch, e)
            return
        self._acknowledge(batch)
        if captured is not None and not reset:
            await self._start_compaction(captured, last, gen)

    def _take_snapshot_request(self) -> int:
        """Clear the pending request; the snapshot about to be captured covers every request so far."""
        self._snapshot_wanted = False
        return self._snap_requested

    def _snapshot_covered(self, gen: int) -> None:
        self._snap_covered = max(self._snap_covered, gen)

    async def barrier(self) -> None:
        """Wait until every record appended so far is durable; raises
        ``JournalError`` if the newest of them failed (a caller answering from
        state that a pending record made, e.g. a repeated Allocate)."""
        fut = self._last_fut
        if fut is not None and self.durable_seq < self.seq:
            await asyncio.shield(fut)

    def request_snapshot(self) -> None:
        """Write a snapshot of ``capture()`` soon, in the background (an owner
        whose informational, non-journaled parts changed). Coalesced: one
        snapshot at a time, taken at a batch boundary."""
        if self._closed or self.capture is None:
            return
        self._snap_requested += 1
        self._snapshot_wanted = True
        self._kick()

    def request_reset(self) -> None:
        """The owner kept a change in memory whose record failed (a release
        it cannot take back): the next batch rewrites the snapshot first."""
        self._needs_reset = True

    def _idle_compaction(self) -> bool:
        return self._compaction is None or self._compaction.done()

    def _append_sync(self, data: bytes) -> None:
        fd = self._fd
        assert fd is not None
        start = self.size
        try:
            view = memoryview(data)
            off = start
            while view:
                n = os.pwrite(fd, view, off)
                view, off = view[n:], off + n
            os.fdatasync(fd)
        except BaseException:
            try:  # leave the disk as it was: nothing of this batch
                os.ftruncate(fd, start)
                os.fdatasync(fd)
            except OSError:
                self._needs_reset = True
            raise
        self.size = start + len(data)
        self.syncs += 1

    def _fail(self, batch: list[_Pending], e: Exception) -> None:
        failed = batch + self._queue  # later records were built on these
        self._queue = []
        self.seq = self.durable_seq
        self.failures += 1
        err = e if isinstance(e, JournalError) else JournalError(
            getattr(e, "errno", None) or 0, f"{getattr(e, 'strerror', None) or e} (writing {self.wal.name})")
        self.log.error(
            "journal write failed", path=self.wal, records=len(failed), error=str(e), reset=self._needs_reset,
        )
        for p in reversed(failed):
            if p.undo is not None:
                try:
                    p.undo()
                except Exception:  # noqa: BLE001 - one bad undo must not stop the others
                    self.log.exception("journal undo failed", seq=p.seq)
        for p in failed:
            if not p.fut.done():
                p.fut.set_exception(err)

    # ------------------------------------------------------------------ compaction

    def _wants_compaction(self) -> bool:
        return (self.size >= self.compact_bytes or self._snapshot_wanted) and self._idle_compaction()

    async def _start_compaction(self, state: S, seq: int, gen: int) -> None:
        """Rotate the journal now (between batches), write the snapshot in the
        background, then drop the rotated journal. Called by the writer alone,
        with no snapshot in flight."""
        assert self._idle_compaction(), "one snapshot at a time"
        loop = asyncio.get_running_loop()
        try:
            rotated = await self._io.run(self._rotate_sync)
        except OSError as e:
            self.log.error("journal rotate failed", path=self.wal, error=str(e))
            self._needs_reset = True
            self._snapshot_covered(gen)
            return

        async def write() -> None:
            try:
                await loop.run_in_executor(None, self._snapshot_sync, state, seq, rotated)
            finally:
                self._snapshot_covered(gen)

        self._compaction = loop.create_task(write(), name=f"journal-snapshot-{self.path.name}")

    def _rotate_sync(self) -> bool:
        if self.old.exists():  # an earlier snapshot failed: keep it, grow .wal
            return False
        os.rename(self.wal, self.old)
        self._open_fresh_wal()
        _fsync_dir(self.path.parent)
        return True

    def _snapshot_sync(self, state: S, seq: int, rotated: bool) -> None:
        try:
            write_atomic(self.path, self.codec.encode_snapshot(state, seq), self.mode)
            self.old.unlink(missing_ok=True)
            _fsync_dir(self.path.parent)
            self.snapshots += 1
            release_freed_memory()  # the encoded text, freed in this worker thread's arena
        except Exception as e:  # noqa: BLE001 - the journal still holds everything; retried at the next size
            self.log.error("state snapshot failed", path=self.path, error=str(e))

    async def compact_now(self) -> None:
        """Write a snapshot of ``capture()`` now (a release, tests, shutdown) and
        wait for it. Concurrent callers share snapshots instead of writing the
        file at once: the request goes to the writer, which captures at its next
        batch boundary, after any snapshot already in flight. Returns when a
        snapshot captured after this call is on disk, or was tried and failed
        (then the journal still holds everything, and the failure is logged)."""
        if self.capture is None or not self._started or self._closed:
            await self.drain()
            return
        self.request_snapshot()
        want = self._snap_requested
        while self._snap_covered < want and not self._closed:
            if not self._busy() and self._idle_compaction():
                if not self._snapshot_wanted:  # nothing left that could cover it (the owner dropped capture)
                    break
                self._kick()
            await self.drain()

    async def drain(self) -> None:
        """Wait until every queued record is durable or failed."""
        while True:
            if self._task is not None and not self._task.done():
                await asyncio.shield(self._task)
                continue
            futs = [p.fut for p in self._inflight] + [p.fut for p in self._queue]
            if not futs:
                break
            if not self._busy() and not self._kick_scheduled:
                self._kick()
            await asyncio.wait(futs)
        if self._compaction is not None:
            await asyncio.shield(self._compaction)

    def close_sync(self) -> None:
        """Close a journal that was only used to ``recover`` (no loop needed)."""
        self._closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._io.shutdown()

    async def close(self) -> None:
        if self._closed:
            return
        await self.drain()
        self._closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            if self.size == 0 and not self._needs_reset:  # nothing since the snapshot: leave just the snapshot
                try:
                    self.wal.unlink()
                    _fsync_dir(self.path.parent)
                except OSError:
                    pass
        self._io.shutdown()
