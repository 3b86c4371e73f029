"""Directories and files under hwagent's root dir, made and opened without following links.

The root dir holds what the daemon trusts on the next start (pod records,
runtime state) and what it writes for users (logs). A symbolic link planted at
``<root>/logs/<pod>`` or ``<root>/runtime/<uid>`` once made hwagent write there
instead, anywhere on the machine; a link in the manifest directory made it read
any file. So every directory below the root is walked one component at a
time from a directory descriptor, each opened with ``O_NOFOLLOW|O_DIRECTORY``
(a link or a non-directory is refused with ``UnsafePathError``, never
followed), missing ones created with ``mkdir(dir_fd=...)``, and files are opened
with ``O_NOFOLLOW`` relative to their directory's descriptor.

The root dir itself is the operator's choice and may be a link (e.g. onto a
bigger disk); only what lies below it is held to the rule (it is created,
0755 like the daemon's ``prepare_root`` makes it, when missing).

Modes: directories are created with ``mode`` (umask bypassed with fchmod), and
an existing one with more permission bits than ``mode`` is narrowed to it
(``tighten``): state an older hwagent left 0755 becomes owner-only as soon as
hwagent walks through it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

__all__ = ["UnsafePathError", "ensure_dir", "ensure_private_tree", "open_dir", "open_file", "opened_dir",
           "replace_file", "rel_parts"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: a directory passed through, not read (search permission is enough: ``<root>/logs`` is 0711)
_PASS_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePathError(OSError):
    """A path under the root dir is a symbolic link, or not what it must be: refused, never followed."""


def _refused(path: Path, root: Path, err: OSError, want: str) -> UnsafePathError:
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        why = (f"{path} is a symbolic link; hwagent never follows links under its root dir {root}. "
               f"Remove the link; hwagent makes a fresh {want} in its place")
        return UnsafePathError(errno.ELOOP, why)
    return UnsafePathError(err.errno or errno.ENOTDIR,
                           f"{path} is not a {want}; hwagent made it one under its root dir {root}. Move it away")


def rel_parts(rel: str | os.PathLike[str] | Sequence[str]) -> tuple[str, ...]:
    """The components of a relative path; absolute paths and ``..`` are refused (they would leave the root)."""
    parts = tuple(rel) if isinstance(rel, (tuple, list)) else PurePosixPath(os.fspath(rel)).parts  # type: ignore[arg-type]
    for p in parts:
        if not p or p in (".", "..") or "/" in p or "\0" in p:
            raise ValueError(f"path component {p!r} of {parts!r} would leave the root dir")
    return parts


def open_dir(root: str | os.PathLike[str], rel: str | os.PathLike[str] | Sequence[str] = (), *, create: bool = False,
             mode: int = 0o700, tighten: bool = True) -> int:
    """A descriptor of ``root/rel`` (the caller closes it), every component below
    ``root`` opened without following links; with ``create`` missing ones are made."""
    parts = rel_parts(rel)
    if create and not os.path.isdir(root):
        os.makedirs(root, 0o755, exist_ok=True)  # as the daemon makes it; normally prepare_root did
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except PermissionError:
        # a root dir others may pass but not list (0711, agent.daemon.rootmodes): a user walks
        # through it to what is theirs, as through <root>/logs
        if not parts or create or tighten:
            raise
        fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    # the path walked so far is only for a refusal's message: made then, not per component
    # (the registry and the runtime walk in a few times per pod; issue 23)
    def path() -> Path:
        return Path(root).joinpath(*parts[:i + 1])

    i = 0
    try:
        for i, name in enumerate(parts):
            try:
                nfd = _open_component(name, fd, last=i == len(parts) - 1, may_pass=not (create or tighten))
                made = False
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: opened (and checked) below
                    os.mkdir(name, mode, dir_fd=fd)
                try:
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise _refused(path(), Path(root), e, "directory") from None
                    raise
                made = True
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refused(path(), Path(root), e, "directory") from None
                raise
            os.close(fd)
            fd = nfd
            if made:
                os.fchmod(fd, mode)  # mkdir's mode went through the umask
            elif tighten:
                _narrow(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_component(name: str, dir_fd: int, *, last: bool, may_pass: bool) -> int:
    """Open one directory of the walk; one the caller may only search (a non-root
    ``hwagent logs`` through ``<root>/logs``, 0711) is opened O_PATH when it is not
    the last: enough to walk on from, never to list."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        if last or not may_pass:
            raise
        return os.open(name, _PASS_FLAGS, dir_fd=dir_fd)


@contextlib.contextmanager
def opened_dir(root: str | os.PathLike[str], rel: str | os.PathLike[str] | Sequence[str] = (), **kw: object) -> Iterator[int]:
    """``open_dir`` as a context manager: the descriptor is closed on exit."""
    fd = open_dir(root, rel, **kw)  # type: ignore[arg-type]
    try:
        yield fd
    finally:
        os.close(fd)


def ensure_dir(root: str | os.PathLike[str], rel: str | os.PathLike[str] | Sequence[str], *, mode: int = 0o700,
               tighten: bool = True) -> Path:
    """Create the directory chain ``root/rel`` (no link followed, ``mode``); returns its path."""
    os.close(open_dir(root, rel, create=True, mode=mode, tighten=tighten))
    return Path(root).joinpath(*rel_parts(rel))


def _narrow(fd: int, mode: int) -> None:
    have = stat.S_IMODE(os.fstat(fd).st_mode)
    if have & ~mode:
        os.fchmod(fd, have & mode)


def ensure_private_tree(root: str | os.PathLike[str], rel: str | os.PathLike[str] | Sequence[str],
                        mode: int = 0o700) -> Path:
    """``ensure_dir`` plus, one level down, every directory in it narrowed to ``mode``
    (links skipped, never followed): at start, per-pod directories an older hwagent
    made 0755 become owner-only before anything else reads the tree."""
    with opened_dir(root, rel, create=True, mode=mode) as dfd:
        for name in os.listdir(dfd):
            try:
                cfd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
            except OSError:  # a file, a link, gone meanwhile: nothing to narrow
                continue
            try:
                _narrow(cfd, mode)
            finally:
                os.close(cfd)
    return Path(root).joinpath(*rel_parts(rel))


def open_file(dir_fd: int, name: str, flags: int, mode: int = 0o600, *, where: Path | None = None,
              root: Path | None = None) -> int:
    """Open ``name`` in the directory ``dir_fd`` without following a link (``O_NOFOLLOW``).
    A link is refused with ``UnsafePathError``; ``where``/``root`` only make the message."""
    rel_parts((name,))
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            where = where or Path(name)
            raise _refused(where / name, root or where, e, "regular file") from None
        raise


def replace_file(dir_fd: int, name: str, payload: bytes, mode: int = 0o600) -> None:
    """Replace ``name`` in ``dir_fd`` by rename from a temp file (a reader sees the old
    or the new file, never a torn one). No fsync: for state that describes processes,
    which a power cut ends too (durable files use ``agent.statefile.write_atomic``).
    The rename replaces a link planted at ``name`` rather than writing through it."""
    tmp = f".{name}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dir_fd)  # a crashed write's leftover (or a planted link): never written through
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
