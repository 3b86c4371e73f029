"""`hwagent logs [-f] [--tail N] [--since DUR] [--timestamps] NAME [-c CONTAINER]`: a container's output.

Reads the files the runtime's shims write, ``<root>/logs/<namespace>_<pod>/
<container>.log`` (rotated files ``.log.1`` ... are older), so it works whether
or not the daemon runs. ``-f`` follows the file across rotations. The log holds
the workload's bytes only; when each line arrived is in the shim's times file
beside it (``<container>.times``, agent/runtime/logtimes.py), which ``--since``
and ``--timestamps`` read. ``--tail``, ``--since`` and ``--timestamps`` look at
the current file, and the rotated ones too with ``--previous-files``. The directory
name is computed as the runtime computes it (``agent.runtime.logdir``: the
longest pod names get a shortened name with a hash), and a symbolic link in its
place, or in a log file's, is refused rather than followed.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from agent.cli import CommandError
from agent.commands._config import daemon_root
from agent.commands._exitcodes import EXIT_NOT_FOUND
from agent.commands._tail import Tail
from agent.commands._tail import copy_all as _copy
from agent.commands._tail import open_log as _open_log
from agent.runtime.logdir import LOGS, log_dir, log_dir_name, log_file_name
from agent.safepath import UnsafePathError, opened_dir

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["add_parser", "run", "log_file", "no_pod", "follow", "follow_lines", "Tail"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "logs",
        help="print a workload container's output",
        description="Print the stdout/stderr of a container of a pod hwagent runs (standalone mode).",
    )
    p.add_argument("name", metavar="NAME", help="pod name, or NAMESPACE/NAME")
    p.add_argument("-c", "--container", help="container name (needed when the pod has several)")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing what the container writes")
    p.add_argument("--previous-files", action="store_true", help="print the rotated files first, oldest first")
    p.add_argument("--tail", type=int, metavar="N", help="only the last N lines (then follow, with -f)")
    p.add_argument("--since", metavar="DUR",
                   help="only lines received in the last DUR (90s, 5m, 1h30m, 2d) or since an RFC 3339 time")
    p.add_argument("-t", "--timestamps", action="store_true",
                   help="put the time the shim received each line (RFC 3339, UTC) in front of it; - when unknown")
    p.add_argument("--config", metavar="FILE", help="TOML config file (default: embedded defaults)")
    p.add_argument("--root-dir", metavar="DIR", help="hwagent's root dir (overrides the config)")
    p.set_defaults(func=run)


def no_pod(namespace: str, name: str, root: Path) -> str:
    """The one answer for a pod without logs here: missing, never started, or another user's."""
    return f"no pod {namespace}/{name} with logs under {root / LOGS}; `hwagent ps` lists the pods"


def log_file(root: Path, namespace: str, name: str, container: str | None) -> Path:
    d = log_dir(root, namespace, name)
    try:
        with opened_dir(root, (LOGS, log_dir_name(namespace, name)), tighten=False) as dfd:
            entries = {e: os.stat(e, dir_fd=dfd, follow_symlinks=False) for e in os.listdir(dfd)}
    except UnsafePathError as e:
        raise CommandError(e.strerror or str(e)) from None
    except (FileNotFoundError, PermissionError):
        # another user's pod (its directory is its user's, 0700) reads as one that is not there, in the
        # words describe uses: "Permission denied" would tell the caller that it exists
        raise CommandError(no_pod(namespace, name, root), EXIT_NOT_FOUND) from None
    except OSError as e:
        raise CommandError(f"cannot read {d}: {e.strerror}") from None
    names = sorted(e[: -len(".log")] for e in entries if e.endswith(".log"))
    if container is None:
        if len(names) != 1:
            raise CommandError(f"pod {namespace}/{name} has containers {', '.join(names) or '(none)'}: choose one with -c")
        container = names[0]
    fname = log_file_name(container)
    st = entries.get(fname)
    if st is None:
        raise CommandError(f"pod {namespace}/{name} has no container {container!r} (has {', '.join(names) or 'none'})",
                           EXIT_NOT_FOUND)
    if not stat.S_ISREG(st.st_mode):
        raise CommandError(f"{d / fname} is not a regular file (a link is never followed); remove it")
    return d / fname


def follow(path: Path, out: BinaryIO, poll_s: float = 0.2, stop: Callable[[], bool] = lambda: False,
           offset: int = 0) -> None:
    """Print new output as it comes (from ``offset`` of the file open now); reopen when the shim rotated it."""
    tail = Tail(path, offset)
    try:
        while not stop():
            if not tail.pump(out):
                time.sleep(poll_s)
    finally:
        tail.close()


def _read_nofollow(path: Path, missing_ok: bool = False) -> bytes:
    """All of one file of the log directory, opened as ``_open_log`` opens one: the directory is the
    pod's user's, so a link is not followed and a FIFO or device in a file's place is refused at
    once (root reading a member's logs printed the root-only file a link named, and hung on a FIFO)."""
    f = _open_log(path)
    if f is None:
        if missing_ok:
            return b""
        raise CommandError(f"{path} is gone (rotated or removed meanwhile); run the command again")
    with f:
        return f.read()


def _copy_file(path: Path, out: BinaryIO) -> None:
    """Copy one file of the log directory to ``out``, opened as ``_read_nofollow`` opens one."""
    f = _open_log(path)
    if f is None:
        raise CommandError(f"{path} is gone (rotated or removed meanwhile); run the command again")
    with f:
        _copy(f, out)


class _TimedTail:
    """``Tail`` for ``-f --timestamps``: whole lines, each with the time its first
    byte reached the shim, read from the times file as it grows; across rotations."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path, self.offset = path, offset
        self.f: BinaryIO | None = None
        self.tf: BinaryIO | None = None
        self.records: list[tuple[int, int]] = []
        self.rec_rest = b""
        self.pending = b""  # a line not yet ended
        self.pending_at = 0  # its offset in the file

    def _open(self) -> bool:
        self.f = _open_log(self.path)
        if self.f is None:
            return False
        self.f.seek(self.offset)
        self.pending, self.pending_at, self.offset = b"", self.offset, 0
        self.records, self.rec_rest = [], b""
        self._open_times()
        return True

    def _open_times(self) -> None:
        """The times file beside the log, when there is one. Asked again before every read
        while it is missing: right after a rotation the shim makes the new log a moment
        before its times file (an older shim keeps none: its lines are shown with "-")."""
        from agent.runtime.logtimes import times_path

        try:
            self.tf = os.fdopen(os.open(times_path(self.path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb")
        except OSError:
            self.tf = None

    def _emit(self, data: bytes, out: BinaryIO, flush: bool = False) -> None:
        from agent.runtime.logtimes import parse_records, split_lines, stamped

        if self.tf is None:
            self._open_times()
        if self.tf is not None:
            raw = self.rec_rest + self.tf.read()
            whole = len(raw) - len(raw) % 16
            self.records += parse_records(raw[:whole])
            self.rec_rest = raw[whole:]
        buf = self.pending + data
        cut = len(buf) if flush else buf.rfind(b"\n") + 1
        for line in split_lines(buf[:cut], self.records, self.pending_at):
            out.write(stamped(line))
        out.flush()
        self.pending, self.pending_at = buf[cut:], self.pending_at + cut

    def pump(self, out: BinaryIO) -> int:
        if self.f is None and not self._open():
            return 0
        assert self.f is not None
        data = self.f.read()
        if data:
            self._emit(data, out)
            return len(data)
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return 0
        if st.st_ino != os.fstat(self.f.fileno()).st_ino or st.st_size < self.f.tell():
            self._emit(self.f.read(), out, flush=True)  # the rest of the rotated file, a last unended line too
            self.close()
            return 1 if self._open() else 0
        return 0

    def close(self) -> None:
        for f in (self.f, self.tf):
            if f is not None:
                f.close()
        self.f = self.tf = None


def follow_lines(path: Path, out: BinaryIO, offset: int, timestamps: bool, poll_s: float = 0.2,
                 stop: Callable[[], bool] = lambda: False) -> None:
    """``-f`` after a selection: new output from ``offset`` on, stamped with ``timestamps``."""
    if not timestamps:
        follow(path, out, poll_s, stop, offset)
        return
    tail = _TimedTail(path, offset)
    try:
        while not stop():
            if not tail.pump(out):
                time.sleep(poll_s)
    finally:
        tail.close()


def _rotated(path: Path) -> list[Path]:
    """``<container>.log.N`` oldest first (the highest N)."""
    found = [p for p in path.parent.glob(f"{path.name}.*") if p.suffix[1:].isdigit()]
    return sorted(found, key=lambda p: -int(p.suffix[1:]))


def _selected(files: list[Path], args: argparse.Namespace) -> tuple[bytes, int]:
    """What ``--tail``/``--since``/``--timestamps`` print of ``files``, and how much of
    the last (the current file) was read: ``-f`` goes on from there."""
    from agent.runtime.logtimes import parse_records, parse_since, select, split_lines, stamped, times_path

    since = None
    if args.since is not None:
        try:
            since = parse_since(args.since, time.time_ns())
        except ValueError as e:
            raise CommandError(str(e)) from None
    lines = []
    size = 0
    for p in files:
        log = _read_nofollow(p)
        lines += split_lines(log, parse_records(_read_nofollow(times_path(p), missing_ok=True)))
        size = len(log)
    kept = select(lines, args.tail, since)
    return b"".join(stamped(ln) if args.timestamps else ln.text for ln in kept), size


def run(args: argparse.Namespace) -> int:
    if args.tail is not None and args.tail < 0:
        raise CommandError(f"--tail {args.tail}: give a number of lines, 0 or more")
    root = daemon_root(args)
    namespace, _, name = args.name.rpartition("/")
    path = log_file(root, namespace or args.namespace, name, args.container)
    out = sys.stdout.buffer
    rotated = _rotated(path) if args.previous_files else []
    if args.tail is not None or args.since is not None or args.timestamps:
        text, end = _selected([*rotated, path], args)
        out.write(text)
        out.flush()
        if args.follow:
            follow_lines(path, out, end, args.timestamps)
        return 0
    for p in rotated:
        _copy_file(p, out)
    if args.follow:
        follow(path, out)
        return 0
    _copy_file(path, out)
    return 0
