"""State files that must survive a crash or restart: the shared mechanics.

Both checkpoints (device manager, cpu policy) need the same four things:
an atomic replace (a reader sees the old file or the new one, never a torn
one, even across a power cut), a way to keep a bad file as evidence without
ever overwriting earlier evidence, a checksum over canonical JSON, and an
async writer that coalesces a burst of changes into few writes while each
caller still learns when *its* change is on disk. Each file's format stays
with its owner; only the mechanics live here.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from agent.eventlog import EventLogger, get_logger

__all__ = [
    "Coalescer",
    "canonical_json",
    "canonical_str",
    "checksum_holds_as_written",
    "release_freed_memory",
    "set_aside",
    "set_aside_if_present",
    "sha256_checksum",
    "sha256_of",
    "temp_name",
    "temp_owner",
    "write_atomic",
]

log = get_logger("hwagent.statefile")
T = TypeVar("T")


def write_atomic(path: str | os.PathLike[str], payload: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``payload`` so that a crash at any point leaves
    either the old file or the complete new one: temp file in the same
    directory (same filesystem, so the rename is atomic), fsync, rename over,
    fsync the directory (so the rename itself is durable). On any failure the
    temp file is removed and the old file is untouched."""
    path = Path(path)
    tmp = path.with_name(temp_name(path.name))
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


_temp_serial = itertools.count()


def temp_name(name: str) -> str:
    """``.<name>.tmp-<pid>-<serial>``: unique per writer, so two writers of one
    file (in two threads of one process, or two processes) never open the
    same temp file and tear each other's bytes; the pid stays the first field
    after ``tmp-`` so a restart can tell its own temps from a killed writer's."""
    return f".{name}.tmp-{os.getpid()}-{next(_temp_serial)}"


def temp_owner(name: str) -> int | None:
    """The pid in a ``temp_name`` (also the older ``.<name>.tmp-<pid>``), else None."""
    _, sep, tail = name.rpartition(".tmp-")
    if not sep:
        return None
    head = tail.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _fsync_dir(directory: Path) -> None:
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def set_aside(path: str | os.PathLike[str], suffix: str = "corrupt") -> Path:
    """Move ``path`` to ``<name>.<suffix>-<UTC time>`` (``~1``, ``~2``... when
    that name is taken) and return the new path. Never overwrites: a second
    bad file in the same second gets its own name, so evidence is not lost.
    The move is a hard link plus unlink (link fails rather than replaces);
    on filesystems without hard links it falls back to check-then-rename."""
    path = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = f"{path.name}.{suffix}-{stamp}"
    n = 0
    while True:
        aside = path.with_name(base if n == 0 else f"{base}~{n}")
        try:
            os.link(path, aside, follow_symlinks=False)
        except FileExistsError:
            n += 1
            continue
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            if os.path.lexists(aside):
                n += 1
                continue
            os.rename(path, aside)
        else:
            os.unlink(path)
        break
    _fsync_dir(path.parent)
    return aside


def set_aside_if_present(path: str | os.PathLike[str], suffix: str = "corrupt") -> Path | None:
    """``set_aside``, or None when ``path`` is no longer there: a file gone
    between "it exists" and the move has nothing left to keep, and a start
    must not fail on evidence that is not there (the caller reports what it
    found wrong either way)."""
    try:
        return set_aside(path, suffix)
    except FileNotFoundError:
        log.warning("nothing to set aside", path=path, suffix=suffix)
        return None


#: one encoder per ASCII choice, built once (json.dumps with options builds one per call)
_CANONICAL = {
    ascii_only: json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only).encode
    for ascii_only in (False, True)
}


def canonical_str(obj: Any, *, ensure_ascii: bool = False) -> str:
    """Sorted keys, no whitespace: one text per value, so a checksum over it
    does not depend on dict order or on how the file was indented.
    ``ensure_ascii`` is part of a format: non-ASCII text as UTF-8 (False) or
    as ``\\uXXXX`` escapes (True) hash differently, so a format picks one.
    (Text, for encoders that splice cached pieces together.)"""
    return _CANONICAL[ensure_ascii](obj)


def canonical_json(obj: Any, *, ensure_ascii: bool = False) -> bytes:
    """``canonical_str`` as UTF-8 bytes: what checksums are computed over."""
    return canonical_str(obj, ensure_ascii=ensure_ascii).encode()


def sha256_of(canonical: bytes) -> str:
    """``sha256:<hex>`` of bytes already in canonical form (for encoders that
    assemble the canonical text piecewise)."""
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def sha256_checksum(obj: Any, *, ensure_ascii: bool = False) -> str:
    """``sha256:<hex>`` of ``canonical_json(obj)``."""
    return sha256_of(canonical_json(obj, ensure_ascii=ensure_ascii))


_TRIM: list[Callable[[int], int] | None] = []


def release_freed_memory() -> bool:
    """Hand the C heap's free pages back to the kernel (glibc ``malloc_trim(0)``), after
    a restore or a snapshot freed the many MB of text it read or built. glibc keeps
    them otherwise, above all in the arena of the worker thread that did the work: a
    10,000-pod daemon held 34 MB more after its first compaction (issue 24). A few ms;
    False where there is no such call (another libc)."""
    if not _TRIM:
        try:
            import ctypes

            _TRIM.append(ctypes.CDLL(None).malloc_trim)
        except (OSError, AttributeError):
            _TRIM.append(None)
    trim = _TRIM[0]
    if trim is None:
        return False
    trim(0)
    return True


#: how a file whose first key is its checksum begins (``{"checksum":"sha256:<hex>",...}``)
_SIGNED_AT = b'{"checksum":"sha256:'
_HEX = 64


def checksum_holds_as_written(raw: bytes) -> bool:
    """Whether ``raw`` is ``{"checksum":"sha256:<hex>",<rest>}\n`` (the layout of a
    canonical document whose first key is the checksum, as the registry and the CPU
    checkpoint write it) and ``<hex>`` is the SHA-256 of the bytes ``{<rest>}``: the
    canonical JSON of every other key, which is what the writer signed. Hashing those
    bytes is the same check as decoding and encoding the document again, without the
    encoding (issue 24: the largest part of restoring 10,000 records). False for any
    other layout (indented, another key order, a flipped byte in the checksum's part):
    the caller then checks the decoded values as before, so the same files pass."""
    n = len(_SIGNED_AT)
    if not raw.startswith(_SIGNED_AT) or raw[n + _HEX:n + _HEX + 2] != b'",' or not raw.endswith(b"}\n"):
        return False
    h = hashlib.sha256(b"{")
    h.update(memoryview(raw)[n + _HEX + 2:-1])
    return h.hexdigest().encode() == raw[n:n + _HEX]


class Coalescer(Generic[T]):
    """Runs ``work(value)`` in the default executor, one run at a time, and
    coalesces: ``submit`` only records that something changed; a single
    background task keeps running until a run has started after the latest
    submit. ``await wait()`` returns once a run that *started after* the last
    ``submit`` has finished (at once when there is none pending), so N changes
    made while a write is in flight cost one more write, not N.

    The value handed to ``work`` is the latest ``submit(value)``, or, when a
    ``snapshot`` callable is given, ``snapshot()`` taken on the loop at the
    start of each run (so state owned by the loop is read there, and only
    once per run however many callers asked).

    Failures: ``work`` raising is logged (``<name>_failed``, on ``logger``) and every pending
    waiter gets the exception; nothing is marked done, so the next ``submit``
    or ``wait`` runs again. A caller whose failure should not reach waiters
    (memory stays authoritative) catches it inside ``work``.

    A waiter that is cancelled does not cancel the run; a run is never
    interrupted halfway."""

    def __init__(
        self,
        work: Callable[[T], Any],
        name: str,
        snapshot: Callable[[], T] | None = None,
        logger: EventLogger | None = None,
    ) -> None:
        self.work = work
        self.name = name
        self.snapshot = snapshot
        self.log = logger or log
        self.gen = 0  # submits so far
        self.done = 0  # the gen the last successful run started at
        self.runs = 0  # runs started (successful or not)
        self.latest: T | None = None
        self._task: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def submit(self, value: T | None = None) -> None:
        """Record a change (needs a running loop: starts the background run)."""
        self.gen += 1
        self.latest = value
        self._ensure()

    def completed_elsewhere(self) -> None:
        """The caller did the work synchronously itself (no loop running):
        count the current state as done so no waiter asks for it again."""
        self.gen += 1
        self.done = self.gen

    async def wait(self) -> None:
        target = self.gen
        if self.done >= target:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((target, fut))
        self._ensure()
        await fut

    async def flush(self, value: T | None = None) -> None:
        """``submit`` then ``wait``: returns once a run begun after this call finished."""
        self.submit(value)
        await self.wait()

    async def drain(self) -> None:
        """Wait for the background task (if any) to finish all it has to do."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def _ensure(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self.done < self.gen:
            gen = self.gen
            self.runs += 1
            err: Exception | None = None
            try:
                # without a snapshot the value is what submit was given (None only where T admits it)
                value = self.snapshot() if self.snapshot is not None else cast(T, self.latest)
                await loop.run_in_executor(None, self.work, value)
            except Exception as e:  # noqa: BLE001 - reported to waiters and logged
                err = e
                self.log.error("coalesced work failed", work=self.name, error=str(e))
            else:
                self.done = gen
            keep = []
            for target, fut in self._waiters:
                if fut.done():
                    continue
                if err is not None:
                    fut.set_exception(err)
                elif target <= gen:
                    fut.set_result(None)
                else:
                    keep.append((target, fut))
            self._waiters = keep
            if err is not None:
                return
