"""Small-file reads from sysfs and procfs: the one set of helpers every reader uses.

Kernel pseudo-files have their own habits: a missing file is normal (old
kernels, partial fixture snapshots), a sysfs attribute comes back whole in one
read, a procfs seq_file may come back in pieces, and a file can vanish between
listing and reading. Readers (topology, devices, pressure) decide what a
missing or odd file means to them; these helpers only answer "what text, if
any", the same way everywhere, like psutil's ``_common`` helpers.

Paths are plain strings or Paths that the caller builds from its root
(``rooted(sysfs_root, "class", "net")``), never a hard-coded "/sys" or "/proc",
so fixture trees read exactly like the live machine.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.cpuset import CPUSet, CPUSetError

__all__ = ["read_text", "read_optional", "read_stripped", "read_int", "read_cpulist", "rooted"]

_CHUNK = 1 << 16

PathLike = str | Path


def rooted(root: PathLike, *parts: str) -> str:
    """``parts`` below ``root``; leading slashes of the parts do not escape the root
    (``rooted("/snap", "/proc/mounts")`` is "/snap/proc/mounts")."""
    return os.path.join(str(root), *(p.lstrip("/") for p in parts))


def read_text(path: PathLike, *, stream: bool = False) -> str | None:
    """The file's text, or None when it does not exist (or is not a file).

    Raw ``os.open``/``os.read``: sysfs files are tiny and there are thousands
    of them on a big machine, and the buffered text-file machinery costs
    several times the system calls themselves. ``stream=True`` reads to EOF
    whatever the read sizes (procfs seq_files may come back in pieces).
    Other errors (EACCES, EIO) raise OSError: a tolerant reader notes them.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        # sysfs hands a whole attribute (at most a page) to the first read;
        # a short read therefore means the end, saving a second system call
        data = os.read(fd, _CHUNK)
        if stream or len(data) == _CHUNK:
            chunks = [data]
            while chunk := os.read(fd, _CHUNK):
                chunks.append(chunk)
            data = b"".join(chunks)
    except IsADirectoryError:
        return None
    finally:
        os.close(fd)
    return data.decode("ascii", errors="replace")


def read_optional(path: PathLike, *, stream: bool = True) -> str | None:
    """The file's text, or None when it is absent *or* unreadable for any reason
    (a process or cgroup that went away mid-read raises ESRCH/ENODEV, not ENOENT)."""
    try:
        return read_text(path, stream=stream)
    except OSError:
        return None


def read_stripped(path: PathLike) -> str | None:
    """A one-value attribute without its newline; None when absent or unreadable."""
    text = read_optional(path, stream=False)
    return text.strip() if text is not None else None


def read_int(path: PathLike) -> int | None:
    """A decimal attribute; None when absent, unreadable or not an integer."""
    text = read_stripped(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def read_cpulist(path: PathLike) -> CPUSet | None:
    """A list-format CPU/node set ("0-3,8"); None when absent, unreadable or malformed."""
    text = read_stripped(path)
    if text is None:
        return None
    try:
        return CPUSet.parse(text)
    except CPUSetError:
        return None
