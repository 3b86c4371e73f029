"""Starting a container through the exec shim, and noticing when it ends.

The shim is spawned with ``posix_spawn`` (no fork of the daemon's address
space), in its own session; its handshake comes back on a pipe dup'ed to fd 3.
It runs as root on a user's behalf, so it starts with a fixed environment of
hwagent's own (``SHIM_ENV``): the workload's environment is data, written to a
memfd handed over as fd 4, which the shim applies only in the workload's final
exec, after the drop to the user (a loader variable of the job, ``LD_PRELOAD``
and the like, never reaches a root process).
Exits are noticed through a pidfd of the shim (readable when it exits), which
works the same for a shim the daemon spawned (then also reaped here) and for
one it re-attached to after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.contracts.pods import RLimit, RunAs
from agent.runtime.rlimits import shim_arg
from agent.runtime.state import ContainerFiles, ExitInfo

__all__ = ["LaunchError", "Started", "shim_command", "python_shim_command", "spawn", "attach", "wait_exit", "shim_alive"]

HANDSHAKE_FD = 3
#: the workload's environment, "NAME=VALUE\0" entries (shim -e)
ENV_FD = 4
#: the shim's own environment, whatever the job's: nothing a loader or an interpreter acts on
SHIM_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}


class LaunchError(Exception):
    """The workload did not start; ``stage`` says where (cgroup, mount, chdir, exec, shim)."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


@dataclass
class Started:
    shim_pid: int
    pid: int
    #: a pidfd of the shim (owned: closed by wait_exit)
    pidfd: int
    #: whether the shim is this process's child (then it is reaped here)
    child: bool = True


#: ``[runtime] shim`` naming the Python fallback itself (agent/runtime/shim.py)
PYTHON_SHIM = "python"


def shim_command(configured: str = "") -> list[str]:
    """The shim's argv prefix: the configured one (``python``: the Python fallback), the C
    shim built by scripts/setup.sh next to the interpreter or on PATH, else the Python fallback."""
    if configured == PYTHON_SHIM:
        return python_shim_command()
    if configured:
        return [configured]
    beside = Path(sys.executable).parent / "hwagent-shim"
    if os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("hwagent-shim")
    if found:
        return [found]
    return python_shim_command()


def python_shim_command() -> list[str]:
    """The Python fallback shim's argv prefix: isolated (-I: no PYTHON* variable, no user site,
    not the working directory on the path) and without site (-S: a shorter start)."""
    return [sys.executable, "-I", "-S", str(Path(__file__).with_name("shim.py"))]


def _argv(shim: Sequence[str], files: ContainerFiles, log: Path, log_max: int, log_keep: int, cwd: str,
          procs: Sequence[str], binds: Sequence[tuple[str, str, bool]], argv: Sequence[str],
          user: RunAs | None = None, rlimits: Sequence[RLimit] = ()) -> list[str]:
    out = [*shim, str(files.path), str(log), str(log_max), str(log_keep), str(HANDSHAKE_FD), cwd]
    if user is not None:
        # the workload's identity; the shim also writes the log with it (its fs uid/gid)
        out += ["-u", str(user.uid), str(user.gid), ",".join(map(str, user.groups)) or "-"]
    if rlimits:
        # its submitter's limits, set by the shim's child as root, before the drop (raising a hard
        # limit needs root): exactly those, never the daemon's own
        out += ["-l", shim_arg(rlimits)]
    out += ["-e", str(ENV_FD)]
    for p in procs:
        out += ["-p", p]
    for src, dst, ro in binds:
        out += ["-b", src, dst, "ro" if ro else "rw"]
    return out + ["--", *argv]


def encode_env(env: Mapping[str, str]) -> bytes:
    """The workload's environment as the shim reads it from ENV_FD: "NAME=VALUE\\0" each.
    A name that is empty or holds '=' or NUL, or a value with NUL, cannot be an environment
    entry: LaunchError (stage env), nothing started."""
    out = bytearray()
    for name, value in env.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise LaunchError("env", f"not a valid environment variable: {name!r}")
        out += f"{name}={value}\0".encode(errors="surrogateescape")
    return bytes(out)


def _env_memfd(env: Mapping[str, str]) -> int:
    """A memfd holding the encoded environment, read from its start (close-on-exec: only the
    shim's copy at ENV_FD crosses the spawn), above the descriptors the spawn dup's onto."""
    data = encode_env(env)
    fd = os.memfd_create("hwagent-env", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        return _above_targets(fd)
    except BaseException:
        os.close(fd)
        raise


def _above_targets(fd: int) -> int:
    """``fd`` itself, or a close-on-exec copy of it above HANDSHAKE_FD and ENV_FD: the spawn's
    dup2 onto those must not overwrite a descriptor another dup2 of the same spawn still reads."""
    floor = max(HANDSHAKE_FD, ENV_FD) + 1
    if fd >= floor:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
    finally:
        os.close(fd)


async def _read_line(fd: int, timeout_s: float) -> str:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[str] = loop.create_future()
    buf = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        buf.extend(chunk)
        if (not chunk or b"\n" in buf) and not fut.done():
            fut.set_result(buf.decode(errors="replace").split("\n", 1)[0])

    os.set_blocking(fd, False)
    loop.add_reader(fd, readable)
    try:
        return await asyncio.wait_for(fut, timeout_s)
    finally:
        loop.remove_reader(fd)


async def spawn(shim: Sequence[str], files: ContainerFiles, log: Path, *, log_max: int, log_keep: int,
                cwd: str, procs: Sequence[str], binds: Sequence[tuple[str, str, bool]], argv: Sequence[str],
                env: Mapping[str, str], timeout_s: float = 30.0, user: RunAs | None = None,
                rlimits: Sequence[RLimit] = ()) -> Started:
    envfd = _env_memfd(env)
    r = w = -1
    try:
        r, w0 = os.pipe2(os.O_CLOEXEC)
        w = _above_targets(w0)
        args = _argv(shim, files, log, log_max, log_keep, cwd, procs, binds, argv, user, rlimits)
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
            # the shim's own complaints (bad arguments, a Python fallback's traceback)
            (os.POSIX_SPAWN_OPEN, 2, str(files.path / "shim.err"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
            (os.POSIX_SPAWN_DUP2, w, HANDSHAKE_FD),
            (os.POSIX_SPAWN_DUP2, envfd, ENV_FD),
        ]
        try:
            shim_pid = os.posix_spawn(args[0], args, SHIM_ENV, file_actions=actions, setsid=True)
        except OSError as e:
            raise LaunchError("shim", f"cannot start the shim {args[0]}: {e.strerror}") from None
    except BaseException:
        if r >= 0:
            os.close(r)
        raise
    finally:
        for fd in (w, envfd):
            if fd >= 0:
                os.close(fd)
    try:
        pidfd = os.pidfd_open(shim_pid)
        try:
            line = await _read_line(r, timeout_s)
        except asyncio.TimeoutError:
            os.kill(shim_pid, 9)
            os.waitpid(shim_pid, 0)
            os.close(pidfd)
            raise LaunchError("shim", f"the shim gave no answer within {timeout_s:g} s") from None
    finally:
        os.close(r)
    words = line.split(" ", 3)
    if words[0] == "ok" and len(words) == 3:
        return Started(int(words[1]), int(words[2]), pidfd, child=True)
    # the shim wrote its exit record and exits: reap it
    await wait_exit(Started(shim_pid, 0, pidfd), files)
    if words[0] == "error":
        stage = words[1] if len(words) > 1 else "start"
        raise LaunchError(stage, words[3] if len(words) > 3 else line)
    try:
        err = (files.path / "shim.err").read_text(errors="replace").strip().splitlines()[-1:]
    except OSError:
        err = []
    raise LaunchError("shim", f"the shim failed before starting the workload ({line or 'no output'}"
                              f"{': ' + err[0] if err else ''})")


def shim_alive(shim_pid: int, files: ContainerFiles) -> bool:
    """Whether ``shim_pid`` is still this container's shim (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{shim_pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(files.path).encode() in cmdline


def attach(files: ContainerFiles) -> Started | None:
    """Re-attach to a running container's shim after a restart; None when it is gone."""
    pids = files.pids()
    if pids is None or not shim_alive(pids[0], files):
        return None
    try:
        pidfd = os.pidfd_open(pids[0])
    except ProcessLookupError:
        return None
    if not shim_alive(pids[0], files):  # exited (and its pid reused) between the check and the open
        os.close(pidfd)
        return None
    return Started(pids[0], pids[1], pidfd, child=_parent_of(pids[0]) == os.getpid())


def _parent_of(pid: int) -> int | None:
    """A re-attached shim is still our child when the runtime restarted inside the
    same process (then we must reap it); after a daemon restart its parent is init."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


async def wait_exit(started: Started, files: ContainerFiles) -> ExitInfo:
    """Wait for the shim to exit; its exit record, or an Error when it left none
    (the shim was killed: the workload's status is lost)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not fut.done():
            fut.set_result(None)

    loop.add_reader(started.pidfd, readable)
    try:
        await fut
    finally:
        loop.remove_reader(started.pidfd)
        os.close(started.pidfd)
        started.pidfd = -1
        # reap only a shim that exited; one still running when we are cancelled
        # (daemon shutdown leaving workloads) is left to run
        if started.child and fut.done() and not fut.cancelled():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(started.shim_pid, 0)
    info = files.exit()
    if info is None:
        return ExitInfo(137, message="exit status lost: the container's shim was killed")
    return info
