"""Look a user's paths up as that user: a fresh thread that takes the user's filesystem identity.

The daemon runs as root; a user's pod names a working directory and a command.
Looked up as root, the answer told the user what exists where the user cannot
look (``/root/.pyenv`` "Permission denied" at start, ``/root/.nothere`` "does not
exist" at admission). Here the lookups run with the user's identity, so the
answer is the one the user's own shell would get.

How: Linux keeps credentials per thread, and the filesystem ones (``setfsuid``,
``setfsgid``) and the supplementary groups (the raw ``setgroups`` system call, not
glibc's wrapper, which applies it to every thread of the process) can be changed
for one thread alone, the way NFS and SMB servers do a user's file access. The
lookups run in a thread made for them that changes its own identity first and
ends after them, so no other code ever runs with it and nothing needs putting
back; the daemon's other threads keep root's. A new thread costs ~0.3 ms, not the
~9 ms of a spawned interpreter, and is not a fork of a process with gRPC threads.
Moving the fs uid off 0 also drops the filesystem capabilities
(``CAP_DAC_OVERRIDE``, ``CAP_DAC_READ_SEARCH``, ...) of that thread, so its
``stat`` and ``faccessat(AT_EACCESS)`` answer exactly as for the user.

A lookup that does not end (a user's FUSE or a dead NFS mount) is given up after
``timeout_s`` and its thread is left to finish on its own; a user may have at most
``MAX_PENDING`` of them at a time, so it cannot pile threads up.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import platform
import threading
from collections.abc import Callable
from typing import TypeVar

from agent.contracts.pods import RunAs

__all__ = ["LookupUnavailable", "LookupStuck", "SETGROUPS_NR", "as_user", "MAX_PENDING"]

T = TypeVar("T")

#: the setgroups system call (32-bit gids) per machine; elsewhere the lookup is unavailable
SETGROUPS_NR = {"x86_64": 116, "aarch64": 159, "riscv64": 159, "loongarch64": 159, "ppc64le": 80, "s390x": 206}
#: lookups of one user that may be running (stuck) at once
MAX_PENDING = 2
_ASK = ctypes.c_uint(0xFFFFFFFF)  # (uid_t)-1: setfsuid changes nothing and answers the current value

#: uid -> its lookups whose thread has not ended (counted down by the thread itself, so a lookup
#: that ends after its loop closed is still counted out)
_pending: dict[int, int] = {}
_pending_lock = threading.Lock()
_libc: ctypes.CDLL | None = None


class LookupUnavailable(Exception):
    """This machine cannot change one thread's identity (the caller skips the lookup)."""


class LookupStuck(Exception):
    """The lookup did not end in time, or too many of this user's are still running."""


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.setfsuid.restype = libc.setfsgid.restype = ctypes.c_int
        _libc = libc
    return _libc


def _become(uid: int, gid: int, groups: tuple[int, ...]) -> None:
    """Give the calling thread (and no other) the user's groups and filesystem ids."""
    nr = SETGROUPS_NR.get(platform.machine())
    if nr is None:
        raise LookupUnavailable(f"no per-thread setgroups known on {platform.machine()}")
    libc = _lib()
    arr = (ctypes.c_uint * max(1, len(groups)))(*groups)
    if libc.syscall(ctypes.c_long(nr), ctypes.c_long(len(groups)), arr) != 0:
        e = ctypes.get_errno()
        raise LookupUnavailable(f"setgroups: {os.strerror(e)}")
    libc.setfsgid(ctypes.c_uint(gid))
    libc.setfsuid(ctypes.c_uint(uid))
    # both answer the previous value and fail silently: read the ids back
    if libc.setfsuid(_ASK) != uid or libc.setfsgid(_ASK) != gid:
        raise LookupUnavailable(f"setfsuid/setfsgid to {uid}/{gid} did not take")


async def as_user(user: RunAs, fn: Callable[[], T], timeout_s: float = 5.0) -> T:
    """``fn()`` in a thread of its own with ``user``'s groups and filesystem ids; what it returns or raises.
    LookupUnavailable when the thread cannot take them (nothing ran), LookupStuck when it did not end
    in ``timeout_s`` or ``MAX_PENDING`` lookups of the user still run."""
    if user.uid is None or user.gid is None:
        raise ValueError(f"a lookup as an incomplete user (uid {user.uid}, gid {user.gid})")
    uid, gid, groups = user.uid, user.gid, tuple(user.groups)
    loop = asyncio.get_running_loop()
    with _pending_lock:
        if _pending.get(uid, 0) >= MAX_PENDING:
            raise LookupStuck(f"{MAX_PENDING} earlier lookups as uid {uid} have not ended (a filesystem that does "
                              "not answer?)")
        _pending[uid] = _pending.get(uid, 0) + 1
    fut: asyncio.Future[T] = loop.create_future()

    def finish(ok: bool, value: object) -> None:
        if not fut.done():  # not given up on (wait_for cancels it)
            fut.set_result(value) if ok else fut.set_exception(value)  # type: ignore[arg-type]

    def body() -> None:
        try:
            _become(uid, gid, groups)
            outcome: tuple[bool, object] = (True, fn())
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome = (False, e)
        _done(uid)
        try:
            loop.call_soon_threadsafe(finish, *outcome)
        except RuntimeError:
            pass  # the loop closed while this lookup hung (the daemon stopped)

    try:
        threading.Thread(target=body, name=f"lookup-as-{uid}", daemon=True).start()
    except BaseException:
        _done(uid)
        raise
    try:
        return await asyncio.wait_for(fut, timeout_s)
    except asyncio.TimeoutError:
        raise LookupStuck(f"the lookup as uid {uid} did not end in {timeout_s:g} s (a filesystem that does not "
                          "answer?)") from None


def _done(uid: int) -> None:
    with _pending_lock:
        n = _pending.get(uid, 0) - 1
        if n > 0:
            _pending[uid] = n
        else:
            _pending.pop(uid, None)
