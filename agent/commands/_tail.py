"""Read a container's log as it grows, across the shim's rotations, without following a link.

``hwagent logs -f`` and ``hwagent launch --wait`` both follow a log this way. It lives apart
from the logs command so that a launch streams its job's output with ``os`` alone: the logs
command's module brings argparse, pathlib and safepath, which were ~17 ms of a streaming
``launch --wait`` client (bench/cli.py, tests/unit/test_cli_imports.py).
"""

from __future__ import annotations

import os
import stat

from agent.cli import CommandError

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

    from agent.rootpaths import StrPath

__all__ = ["Tail", "LogUnreadable", "copy_all", "open_log"]


def copy_all(f: BinaryIO, out: BinaryIO) -> int:
    """Copy ``f`` from where it stands to its end to ``out`` (flushed); the count of bytes."""
    n = 0
    while chunk := f.read(65536):
        out.write(chunk)
        n += len(chunk)
    out.flush()
    return n


class LogUnreadable(CommandError):
    """The log is there but cannot be read as one (no regular file, a link): nothing to stream."""


def open_log(path: StrPath) -> BinaryIO | None:
    """``path`` opened for reading without following a link; None when it is not there
    (yet, or any more: a rotation in between). A log is a regular file: anything else in its
    place (a FIFO the pod's user made in its own log directory, a device) is refused at once,
    never waited on (``O_NONBLOCK``: a FIFO's open does not wait for a writer)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise LogUnreadable(f"cannot read {path}: {e.strerror} (a link is never followed)") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LogUnreadable(f"cannot read {path}: not a regular file (a log always is one)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


class Tail:
    """The new bytes of a container's log as they come, across the shim's rotations.

    ``offset``: where the first opening starts reading (what ``launch --wait`` found
    in the file before its pod existed, from an earlier pod of that name). A file
    that does not exist yet (the container has not started) is waited for; a link in
    its place is never followed."""

    def __init__(self, path: StrPath, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self.f: BinaryIO | None = None

    def _open(self) -> bool:
        self.f = open_log(self.path)
        if self.f is None:
            return False
        if self.offset:
            self.f.seek(self.offset)
            self.offset = 0
        return True

    def pump(self, out: BinaryIO) -> int:
        """Copy what is new to ``out``; the count of bytes copied."""
        if self.f is None and not self._open():
            return 0
        assert self.f is not None
        n = copy_all(self.f, out)
        if n:
            return n
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return 0
        if st.st_ino != os.fstat(self.f.fileno()).st_ino or st.st_size < self.f.tell():
            n = copy_all(self.f, out)  # the rest of the rotated file
            self.f.close()
            self.f = None
            if self._open():
                n += copy_all(self.f, out)  # type: ignore[arg-type]
        return n

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f = None
