"""`exec` without ``-t``: the command's stdin, stdout and stderr are pipes this process relays,
as ``docker exec`` does, so no process of the pod ever holds the caller's terminal.

Handing the command the caller's descriptors (what exec did first) gave the pod's user
root's terminal: a ``TIOCSTI`` from the pod pushed a line into it, which root's shell ran
when exec returned (issue 32). Now the command starts in a session and process group of
its own (``setsid``: no controlling terminal, /dev/tty cannot be opened) with pipes; this
process, which keeps the caller's terminal and stays outside the pod's cgroups, copies
the caller's stdin into the command's (and closes it at the caller's EOF) and the
command's stdout and stderr out, bytes as they are. Signals the caller's terminal sends
this process (Ctrl-C's SIGINT, Ctrl-\\'s SIGQUIT, a hangup) and SIGTERM go on to the
command's process group, unless this process was started with them ignored. It returns
when the command ends, with what the command had written by then: children it left
running keep their pipes but are no longer relayed. A command killed by SIGINT, SIGTERM,
SIGHUP or SIGPIPE kills this process with the same signal, as it did when the command
was this process (a calling shell script stops on it); another signal N is 128+N.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import signal

from agent.commands._execchild import exit_status, start_command

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["run_with_pipes", "FORWARDED", "RERAISED"]

#: one read (and the size asked for the command's stdin and stdout pipes): 1 MiB relays 1 GiB of
#: output in ~1.1-1.3 s where 64 KiB took ~1.5-2.0 s (this 2-core machine, load 5; direct: 0.6-0.8 s)
_CHUNK = 1 << 20
#: the signals passed on to the command's process group
FORWARDED = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
#: the command's death by one of these is this process's (their default action ends without a core)
RERAISED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)
#: how often a background job looks again whether it may read the terminal (it would be stopped by
#: SIGTTIN), and, on a kernel without pidfds, whether the command has ended
_POLL_S = 0.5


def run_with_pipes(setup: Callable[[], None], argv: list[str], env: dict[str, str],
                   stdin: int = 0, stdout: int = 1, stderr: int = 2) -> int:
    """Fork the command with pipes for its stdio; the child runs ``setup`` and execs ``argv``
    with ``env`` (agent.commands._execchild); this process relays until the command ends and
    answers its exit status (or dies of its signal, see the module's doc)."""
    _fill_closed(stdin, stdout, stderr)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    for fd in (in_w, out_w):
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _CHUNK)
        except OSError:
            pass
    forwarded = [s for s in FORWARDED if signal.getsignal(s) is not signal.SIG_IGN]
    # blocked across the fork: the child starts with none of this process's handlers running in it
    # (it puts every signal at its default, then unblocks), and none is lost before ours are in place
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, forwarded)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        _stdio_from(in_r, out_w, err_w)
        start_command(setup, argv, env)
    old_handlers = {}
    try:
        for sig in forwarded:
            old_handlers[sig] = signal.signal(sig, lambda s, _f: _signal_group(pid, s))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    try:
        status = _relay(pid, stdin, in_w, {out_r: stdout, err_r: stderr})
    finally:
        for sig, old in old_handlers.items():
            signal.signal(sig, old)
    return _finish(status)


def _fill_closed(*fds: int) -> None:
    """Open /dev/null on each of ``fds`` the caller left closed: the relay then reads an empty
    stdin or drops output there, and no pipe of ours lands on a descriptor it relays."""
    for fd in fds:
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def _stdio_from(in_r: int, out_w: int, err_w: int) -> None:
    """Make the three pipe ends the child's 0, 1 and 2 (first moved above 2, so that an end that
    is itself 0, 1 or 2 when the caller had one closed is not overwritten before it is placed)."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in (in_r, out_w, err_w)]
    for target, fd in enumerate(high):
        os.dup2(fd, target, inheritable=True)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass  # the command's group has ended


def _finish(status: int) -> int:
    """The command's wait status as this process's end."""
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in RERAISED:
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
    return exit_status(status)


def _may_read(fd: int) -> bool:
    """Whether reading ``fd`` now is fine: not a terminal of which this process is a background
    job (the read would stop it with SIGTTIN, where the command might never read at all)."""
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:  # not a terminal, or not this session's: reading it stops nothing
        return True


class _Feed:
    """The caller's stdin on its way into the command's stdin pipe ``sink``: one chunk at a time
    (read only once the last one was taken, so a command that never reads holds nothing up), and
    the caller's end passed on by closing the pipe."""

    def __init__(self, stdin: int, sink: int) -> None:
        self.stdin = stdin
        self.sink: int | None = sink
        self.pending = b""  # read from the caller's stdin, not yet taken by the command
        self.reading = True  # the caller's stdin is still to be read

    def wants_stdin(self) -> bool:
        return self.reading and not self.pending and self.sink is not None

    def wants_sink(self) -> list[int]:
        return [self.sink] if self.pending and self.sink is not None else []

    def read(self) -> None:
        data = _read_caller(self.stdin)
        if data is not None:
            self.pending, self.reading = data, bool(data)
        self._close_at_end()

    def write(self) -> None:
        assert self.sink is not None
        try:
            self.pending = self.pending[os.write(self.sink, self.pending):]
        except BlockingIOError:
            pass
        except OSError:  # EPIPE: the command closed its stdin; what is left of ours is dropped
            self.pending, self.reading = b"", False
        self._close_at_end()

    def _close_at_end(self) -> None:
        if self.sink is not None and not self.reading and not self.pending:
            os.close(self.sink)  # the caller's EOF, passed on
            self.sink = None

    def close(self) -> None:
        if self.sink is not None:
            os.close(self.sink)
            self.sink = None


def _relay(pid: int, stdin: int, in_w: int, outputs: dict[int, int]) -> int:
    """Copy ``stdin`` into the command's stdin pipe ``in_w`` and each output pipe to its
    destination until the command ends; answers its wait status. The pipes are this side's
    own ends, made non-blocking here (the caller's descriptors are left as they are)."""
    for fd in (in_w, *outputs):
        os.set_blocking(fd, False)
    done = _pidfd(pid)
    feed = _Feed(stdin, in_w)
    status: int | None = None
    try:
        while status is None:
            rlist = [*outputs, *([done] if done is not None else [])]
            if feed.wants_stdin() and _may_read(stdin):
                rlist.append(stdin)
            # a background job looks again later whether it may read; without a pidfd, whether the command ended
            poll = feed.wants_stdin() and stdin not in rlist or done is None
            try:
                r, w, _ = select.select(rlist, feed.wants_sink(), [], _POLL_S if poll else None)
            except InterruptedError:  # pragma: no cover - Python retries select after a handler (PEP 475)
                continue
            for fd in [fd for fd in r if fd in outputs]:
                _pass_on(fd, outputs)
            if stdin in r:
                feed.read()
            if w:
                feed.write()
            if done in r:
                _, status = os.waitpid(pid, 0)
            elif done is None:
                status = _ended(pid)
        for fd in list(outputs):  # what the command wrote before it ended (no more: a child it left may go on)
            _drain(fd, outputs)
        return status
    finally:
        if done is not None:
            os.close(done)
        feed.close()
        for fd in outputs:
            os.close(fd)


def _pidfd(pid: int) -> int | None:
    """A descriptor that turns readable when ``pid`` ends (Linux >= 5.3); None on an older
    kernel, where the relay looks every _POLL_S instead."""
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _ended(pid: int) -> int | None:
    """``pid``'s wait status if it has ended (reaped now), else None."""
    got, status = os.waitpid(pid, os.WNOHANG)
    return status if got else None


def _read_caller(stdin: int) -> bytes | None:
    """A chunk of the caller's stdin; b"" at its end or when it cannot be read (closed, EIO);
    None when there is nothing after all (a non-blocking stdin another reader emptied)."""
    try:
        return os.read(stdin, _CHUNK)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _pass_on(fd: int, outputs: dict[int, int]) -> int | None:
    """Copy one chunk of the command's output pipe ``fd`` to its destination: the bytes copied
    (0: none there now), or None (and the pipe closed and forgotten) at its end or when the
    destination cannot take it (a reader that went away: the command gets SIGPIPE on its next
    write, as in a shell pipeline)."""
    try:
        data = os.read(fd, _CHUNK)
    except BlockingIOError:
        return 0
    if data and _write_all(outputs[fd], data):
        return len(data)
    os.close(fd)
    del outputs[fd]
    return None


def _drain(fd: int, outputs: dict[int, int]) -> None:
    """Pass on what is in ``fd`` now: at most a pipe's capacity, so a child the command left
    writing cannot keep this going."""
    left = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    while left > 0:
        n = _pass_on(fd, outputs)
        if not n:
            return
        left -= n


def _write_all(fd: int, data: bytes) -> bool:
    """Write all of ``data`` to the caller's ``fd`` (waiting where it is non-blocking); False
    when it cannot take it (EPIPE, closed)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])
        except OSError as e:
            if e.errno == errno.EINTR:  # pragma: no cover - Python retries writes after a handler
                continue
            return False
    return True
