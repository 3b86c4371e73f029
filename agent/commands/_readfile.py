"""Read a file a caller names (a manifest, an env file) without hanging or swamping the CLI.

``--env-file`` and ``-f`` take any path: a FIFO made the CLI wait forever in
``open()`` for a writer, ``/dev/zero`` was read without end, and a 100 MB
manifest was sent whole, to be cut off by the daemon (the CLI then said "the
daemon stopped answering (BrokenPipeError ...)"). Here a named file is opened
without blocking (``O_NONBLOCK``: a FIFO opens at once), must be a regular file
or a character device (``/dev/null`` is the usual "no manifest"; a device is read
without blocking, so a terminal with nothing typed is refused, not waited on), and
is read to at most ``limit`` bytes; more is refused with a message that names the
limit, before anything is sent (``/dev/zero`` ends there). Standard input (``-``) is read to the same
cap. Only ``os``: the launch path's import budget (tests/unit/test_cli_imports.py).
"""

from __future__ import annotations

import os
import stat
import sys

from agent.cli import CommandError

__all__ = ["read_capped", "too_large", "format_limit"]


def format_limit(limit: int) -> str:
    """``1048576 bytes (1 MiB)``: the exact number a caller can compare with ``ls -l``, and the round one."""
    mib = limit / (1 << 20)
    return f"{limit} bytes ({mib:g} MiB)" if mib >= 1 else f"{limit} bytes"


def too_large(what: str, size: int | None, limit: int) -> CommandError:
    told = f"is {size} bytes, over" if size is not None else "holds more than"
    return CommandError(f"{what} {told} the limit of {format_limit(limit)} for a pod's manifest; "
                        "nothing was sent")


def read_capped(path: str, limit: int, what: str) -> bytes:
    """The bytes of ``path`` (``-``: standard input), at most ``limit`` of them. CommandError (saying
    ``what``, e.g. ``--env-file FILE``) for a path that cannot be opened, is no regular file, or holds
    more than ``limit`` bytes."""
    if path == "-":
        data = sys.stdin.buffer.read(limit + 1)
        if len(data) > limit:
            raise too_large(f"{what} (standard input)", None, limit)
        return data
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise CommandError(f"{what}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        device = stat.S_ISCHR(st.st_mode)
        if not stat.S_ISREG(st.st_mode) and not device:
            raise CommandError(f"{what}: not a regular file ({_kind(st.st_mode)}); give a file")
        if st.st_size > limit:
            raise too_large(what, st.st_size, limit)
        os.set_blocking(fd, device is False)
        parts, have = [], 0
        while have <= limit:
            try:
                chunk = os.read(fd, limit + 1 - have)
            except BlockingIOError:
                raise CommandError(f"{what}: a device with nothing to read now; give a file") from None
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
    except OSError as e:
        raise CommandError(f"{what}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if have > limit:  # it grew while we read
        raise too_large(what, None, limit)
    return b"".join(parts)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"
