"""The child side of ``hwagent exec``: what runs between ``fork`` and the command's ``execve``.

Both ways of running the command (pipes, agent.commands._piperelay; a pty,
agent.commands._ptyrelay) fork a child whose standard descriptors are already the
command's own (pipes or the pty's slave) and whose session is new, so it has no
descriptor and no controlling terminal of the caller's. Here it closes every other
descriptor it inherited (a caller's redirection such as ``9<&0`` would otherwise
hand the pod the caller's terminal: Python's own are close-on-exec, an inherited one
is not), puts every signal back at its default, runs ``setup`` (join the cgroups,
enter the mount namespace, drop to the pod's user, chdir) and only then execs the
command with the container's environment: that environment is never this process's
while it is root, it is only the ``execve``'s argument.
"""

from __future__ import annotations

import os
import resource

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

__all__ = ["exit_status", "close_inherited", "start_command"]

#: above any descriptor a process can hold (fs.nr_open's default): the bound when RLIMIT_NOFILE has none
_FD_CEILING = 1 << 20


def exit_status(wait_status: int) -> int:
    """A ``waitpid`` status as a shell reports it: the exit code, or 128+N for signal N."""
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def close_inherited() -> None:
    """Close every descriptor above 2 (one close_range(2) call on Linux >= 5.9)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    os.closerange(3, hard if 0 < hard < _FD_CEILING else _FD_CEILING)


def start_command(setup: Callable[[], None], argv: list[str], env: dict[str, str], eol: str = "\n") -> NoReturn:
    """In the forked child, its stdio in place: close the rest, default signals, ``setup``, exec.
    Never returns: a failure is printed on the command's stderr (``eol``: "\\r\\n" on a raw pty)
    and ends the child with the status a shell gives (127: not found, 126: cannot run; a
    CommandError's own code)."""
    from agent.cli import CommandError

    try:
        close_inherited()
        # a new session starts with every signal at its default and none blocked, as in a
        # container: a caller from a script's background job has SIGINT and SIGQUIT ignored
        from agent.runtime.shim import default_signals

        default_signals()
        setup()
        os.execvpe(argv[0], argv, env)
    except CommandError as e:
        _die(f"hwagent exec: error: {e}{eol}", e.code)
    except OSError as e:
        _die(f"hwagent exec: cannot run {argv[0]!r}: {e.strerror}{eol}", 127 if isinstance(e, FileNotFoundError) else 126)
    except BaseException as e:  # noqa: BLE001 - the child must never return into the CLI
        _die(f"hwagent exec: {e}{eol}", 126)
    _die("", 126)  # not reached: execvpe replaced this process


def _die(message: str, code: int) -> NoReturn:
    try:
        os.write(2, message.encode())
    finally:
        os._exit(code)
