"""`hwagent logs [-f] NAME [-c CONTAINER]`: a workload container's output.

Reads the files the runtime's shims write, ``<root>/logs/<namespace>_<pod>/
<container>.log`` (rotated files ``.log.1`` ... are older), so it works whether
or not the daemon runs. ``-f`` follows the file across rotations. The directory
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
from typing import BinaryIO

from agent.cli import CommandError
from agent.commands._config import daemon_root
from agent.runtime.logdir import LOGS, log_dir, log_dir_name, log_file_name
from agent.safepath import UnsafePathError, opened_dir

__all__ = ["add_parser", "run", "log_file", "follow", "Tail"]


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
    p.add_argument("--config", metavar="FILE", help="TOML config file (default: embedded defaults)")
    p.add_argument("--root-dir", metavar="DIR", help="hwagent's root dir (overrides the config)")
    p.set_defaults(func=run)


def log_file(root: Path, namespace: str, name: str, container: str | None) -> Path:
    d = log_dir(root, namespace, name)
    try:
        with opened_dir(root, (LOGS, log_dir_name(namespace, name)), tighten=False) as dfd:
            entries = {e: os.stat(e, dir_fd=dfd, follow_symlinks=False) for e in os.listdir(dfd)}
    except UnsafePathError as e:
        raise CommandError(e.strerror or str(e)) from None
    except FileNotFoundError:
        raise CommandError(f"no logs for pod {namespace}/{name} under {root / LOGS}") from None
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
        raise CommandError(f"pod {namespace}/{name} has no container {container!r} (has {', '.join(names) or 'none'})")
    if not stat.S_ISREG(st.st_mode):
        raise CommandError(f"{d / fname} is not a regular file (a link is never followed); remove it")
    return d / fname


def _copy(f: BinaryIO, out: BinaryIO) -> int:
    n = 0
    while chunk := f.read(65536):
        out.write(chunk)
        n += len(chunk)
    out.flush()
    return n


class Tail:
    """The new bytes of a container's log as they come, across the shim's rotations.

    ``offset``: where the first opening starts reading (what ``launch --wait`` found
    in the file before its pod existed, from an earlier pod of that name). A file
    that does not exist yet (the container has not started) is waited for; a link in
    its place is never followed."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self.f: BinaryIO | None = None

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise CommandError(f"cannot read {self.path}: {e.strerror} (a link is never followed)") from None
        self.f = os.fdopen(fd, "rb")
        if self.offset:
            self.f.seek(self.offset)
            self.offset = 0
        return True

    def pump(self, out: BinaryIO) -> int:
        """Copy what is new to ``out``; the count of bytes copied."""
        if self.f is None and not self._open():
            return 0
        assert self.f is not None
        n = _copy(self.f, out)
        if n:
            return n
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return 0
        if st.st_ino != os.fstat(self.f.fileno()).st_ino or st.st_size < self.f.tell():
            n = _copy(self.f, out)  # the rest of the rotated file
            self.f.close()
            self.f = None
            if self._open():
                n += _copy(self.f, out)  # type: ignore[arg-type]
        return n

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f = None


def follow(path: Path, out: BinaryIO, poll_s: float = 0.2, stop: Callable[[], bool] = lambda: False) -> None:
    """Print new output as it comes; reopen when the shim rotated the file."""
    tail = Tail(path)
    try:
        while not stop():
            if not tail.pump(out):
                time.sleep(poll_s)
    finally:
        tail.close()


def run(args: argparse.Namespace) -> int:
    root = daemon_root(args)
    namespace, _, name = args.name.rpartition("/")
    path = log_file(root, namespace or args.namespace, name, args.container)
    out = sys.stdout.buffer
    if args.previous_files:
        rotated = sorted(path.parent.glob(f"{path.name}.*"), key=lambda p: -int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0)
        for p in rotated:
            with open(p, "rb") as f:
                _copy(f, out)
    if args.follow:
        follow(path, out)
        return 0
    with open(path, "rb") as f:
        _copy(f, out)
    return 0
