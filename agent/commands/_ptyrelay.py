"""`exec -t`: a pseudo-terminal for the command, relayed to the caller's terminal, as ``docker exec -t``.

The command gets a fresh pty as its controlling terminal (so ``tty``, job control,
Ctrl-C and full-screen programs work in it); this process keeps the caller's terminal
in raw mode while it copies bytes both ways, so every key, Ctrl-C included, reaches
the command's terminal and its line discipline decides what it means. The caller's
window size is copied to the pty at start and on every SIGWINCH. The caller's
terminal settings are restored however the command ends; the exit status is the
command's (128+N for signal N).

The relay stays in the caller's cgroups: only the child (``setup`` then exec) joins
the container, so the relay's CPU and memory are not the container's. The caller's
terminal is never the command's: the child's session is new, its controlling terminal
and its descriptors 0-2 are the pty's slave, and every other descriptor it inherited is
closed before it runs anything of the pod's (agent.commands._execchild).
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import signal
import struct
import termios
import tty

from agent.commands._execchild import exit_status, start_command

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["run_in_pty", "exit_status"]

_CHUNK = 65536


def _copy_winsize(src: int, dst: int) -> None:
    try:
        size = fcntl.ioctl(src, termios.TIOCGWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
        fcntl.ioctl(dst, termios.TIOCSWINSZ, size)
    except OSError:
        pass  # not a terminal (stdin redirected): the pty keeps its default size


def run_in_pty(setup: Callable[[], None], argv: list[str], env: dict[str, str], stdin: int = 0,
               stdout: int = 1) -> int:
    """Fork with a new pty; the child runs ``setup`` (join, enter, drop privileges, chdir) and
    execs ``argv`` with ``env``; this process relays until the command ends and answers its
    exit status. ``setup`` failing in the child prints its message on the pty and ends it."""
    import pty

    pid, master = pty.fork()
    if pid == 0:  # the child: its stdio is the pty's slave, it leads a new session whose terminal is that
        start_command(setup, argv, env, eol="\r\n")  # nothing else of the caller's: agent.commands._execchild
    is_tty = os.isatty(stdin)
    saved = termios.tcgetattr(stdin) if is_tty else None
    if is_tty:
        _copy_winsize(stdin, master)
    old_winch = signal.signal(signal.SIGWINCH, lambda *_: _copy_winsize(stdin, master))
    try:
        if is_tty:
            tty.setraw(stdin, termios.TCSANOW)
        _relay(master, stdin, stdout)
    finally:
        if saved is not None:
            termios.tcsetattr(stdin, termios.TCSAFLUSH, saved)
        signal.signal(signal.SIGWINCH, old_winch)
        os.close(master)
    _, status = os.waitpid(pid, 0)
    return exit_status(status)


def _relay(master: int, stdin: int, stdout: int) -> None:
    """Copy stdin -> master and master -> stdout until the pty's other side is closed (the
    command and everything it started on the terminal ended: EIO on Linux)."""
    inputs = [master, stdin]
    while True:
        try:
            ready, _, _ = select.select(inputs, [], [])
        except InterruptedError:  # SIGWINCH
            continue
        if master in ready:
            try:
                data = os.read(master, _CHUNK)
            except OSError as e:
                if e.errno != errno.EIO:
                    raise
                data = b""
            if not data:
                return
            _write_all(stdout, data)
        if stdin in ready:
            data = os.read(stdin, _CHUNK)
            if not data:  # the caller's stdin ended: say so to the command (^D), stop reading it
                inputs.remove(stdin)
                _write_all(master, b"\x04")
            else:
                _write_all(master, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]

