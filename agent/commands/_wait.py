"""`launch --wait`: follow a pod to its end, streaming its main container's output, and answer
with its exit status; Ctrl-C as srun has it.

The pod's end comes from one long poll at a time (``GET /v1/pods/NS/NAME?wait=terminal``):
the daemon answers when its registry reports the pod terminal or removed, or after
``WAIT_S`` (then the CLI asks again), so neither side spends CPU while a job runs (it
used to ask every 0.2 s). The log is tailed by the CLI itself (a local file: no daemon
CPU), on its one thread: the long poll's read gives up every ``POLL_S`` while no answer
has come, copies what is new in the log, and reads on (a log thread and ``threading``
were ~1 ms of every launch). srun's habit for
Ctrl-C: the first press interrupts the long poll, prints where the job is and what a
second press does; a second within ``INTERRUPT_WINDOW_S`` stops the pod (SIGTERM,
its grace period, then kill, as ``hwagent stop``) and the wait goes on to the pod's
end, so a job is never left running unseen behind a prompt.
"""

from __future__ import annotations

import sys
import time

from agent.cli import CommandError
from agent.commands._admission import Session, pod_path
from agent.commands._exitcodes import EXIT_LOST, EXIT_NOT_FOUND
from agent.commands._job import main_container, outcome
from agent.commands._podstatus import status_word

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
    from pathlib import Path
    from types import FrameType
    from typing import Any, BinaryIO
    from agent.commands._tail import Tail
else:
    # the C module under signal.py, which turns its constants into IntEnums (~1 ms of a launch's
    # start-up); the calls here are the same (typeshed has no stub for it: mypy reads signal's)
    import _signal as signal

__all__ = ["wait_for", "Interrupts", "LogPump", "OutputLost", "POLL_S", "WAIT_S", "INTERRUPT_WINDOW_S"]

#: the log tail's pause when nothing new came
POLL_S = 0.2
#: one long poll's wait; the CLI asks again after it (a daemon restart is noticed within it)
WAIT_S = 30.0
INTERRUPT_WINDOW_S = 1.0


class _Woken(BaseException):
    """A Ctrl-C cut a long poll short (raised from the SIGINT handler; not an error)."""


class OutputLost(Exception):
    """The job's output could not be written (its reader went away: ``| head``) and the pod ended:
    what ``wait_for`` would have answered, and the error, for the caller to finish its work
    (``--rm``) before it exits as a closed pipe does."""

    def __init__(self, code: int, why: str, pod: dict[str, Any], error: OSError) -> None:
        super().__init__(f"the job's output could not be written: {error}")
        self.code, self.why, self.pod, self.error = code, why, pod, error


class Interrupts:
    """Ctrl-C presses, as srun counts them: ``report`` after a press, ``stop`` after a
    second one within ``window`` seconds of the one before."""

    def __init__(self, window: float = INTERRUPT_WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.clock = clock
        self.last: float | None = None
        self.report = False
        self.stop = False

    def press(self) -> None:
        now = self.clock()
        if self.last is not None and now - self.last <= self.window:
            self.stop = True
        else:
            self.report = True
        self.last = now

    #: set while the main thread is blocked in a long poll: a press then interrupts it
    blocking = False

    def handler(self, _signum: int, _frame: FrameType | None) -> None:
        self.press()
        if self.blocking:
            self.blocking = False
            raise _Woken


class LogPump:
    """Copy a log ``Tail`` to ``out`` each time ``pump`` is called (every ``POLL_S`` of a long
    poll's wait); ``finish`` copies what is left (what the shim wrote before the container ended).
    An error writing ``out`` (a closed pipe) stops the copying, not the wait: ``finish`` raises it.
    A log that is no regular file (``_tail.LogUnreadable``: its user put a FIFO there) is said once
    on ``err`` and not streamed; the wait goes on to the job's exit status."""

    def __init__(self, tail: Tail, out: BinaryIO, err: Any = None) -> None:
        self.tail, self.out, self.err = tail, out, err
        self.error: BaseException | None = None
        self.unreadable = False

    def pump(self) -> None:
        if self.error is not None or self.unreadable:
            return
        try:
            self._copy()
        except Exception as e:  # noqa: BLE001 - raised by finish(); a Ctrl-C's _Woken passes
            self.error = e

    def _copy(self) -> None:
        from agent.commands._tail import LogUnreadable

        try:
            self.tail.pump(self.out)
        except LogUnreadable as e:
            self.unreadable = True
            print(f"hwagent: not streaming the output: {e}", file=self.err or sys.stderr, flush=True)
            return
        self.out.flush()

    def finish(self, drain: bool = True) -> None:
        """Copy what is left (``drain``) and raise the error that stopped the copying, if one did;
        without ``drain`` (the wait ends otherwise: its own error or answer comes first) just close."""
        try:
            if drain:
                if self.error is not None:
                    raise self.error
                if not self.unreadable:
                    self._copy()
        finally:
            self.tail.close()


def _state_line(pod: dict[str, Any], main: str | None) -> str:
    c = main_container(pod, main) or {}
    pid = f", pid {c['pid']}" if c.get("pid") else ""
    return f"{pod['namespace']}/{pod['name']} is {status_word(pod)}{pid}"


def wait_for(session: Session, namespace: str, name: str, uid: str, main: str | None, tail: Tail | None,
             out: BinaryIO | None = None, err: Any = None, poll_s: float = POLL_S,
             wait_s: float = WAIT_S) -> tuple[int, str, dict[str, Any]]:
    """Wait for pod ``namespace/name`` (uid ``uid``) to end: (exit status, the line explaining it, the pod)."""
    path = pod_path(namespace, name)
    out = out or sys.stdout.buffer
    err = err or sys.stderr
    ints = Interrupts()
    pump = LogPump(tail, out, err) if tail is not None else None
    previous = signal.signal(signal.SIGINT, ints.handler)
    ended = False
    try:
        # summary: the daemon neither reads the pod's cgroups nor encodes its record and events, which
        # the wait would drop (~0.4 ms of its CPU per answer); the job's JSON is ps's shape either way
        query = {"wait": "terminal", "timeout": f"{wait_s:g}", "summary": "1"}
        while True:
            if ints.stop:
                ints.stop = ints.report = False
                print(f"hwagent: stopping {namespace}/{name} (SIGTERM, then kill after its grace period)",
                      file=err, flush=True)
                session.request("POST", pod_path(namespace, name, "stop"), {}, timeout=86400 + 60)
            try:
                if ints.report:
                    ints.report = False
                    pod = _get(session, path, {"summary": "1"}, 30)
                    if _running(pod, uid):
                        print(f"hwagent: {_state_line(pod, main)}; press Ctrl-C again within 1 s to stop it",
                              file=err, flush=True)
                        continue
                else:
                    ints.blocking = True  # a Ctrl-C from here on interrupts the long poll
                    pod = _get(session, path, query, wait_s + 30, _idle(pump, ints), poll_s)
                    ints.blocking = False
                    if _running(pod, uid):
                        continue  # the wait's timeout passed: ask again
            except _Woken:
                session.reset()  # the cut request's answer is never read: a new connection
                continue
            if not pod:
                return EXIT_LOST, f"{namespace}/{name} was removed before it ended", {}
            if pod["uid"] != uid:
                return EXIT_LOST, f"{namespace}/{name} was removed (a pod of that name replaced it)", pod
            ended = True
            code, why = outcome(pod, main)
            if pump is not None:
                try:
                    pump.finish()
                except OSError as e:
                    raise OutputLost(code, why, pod, e) from e
            return code, why, pod
    finally:
        ints.blocking = False
        signal.signal(signal.SIGINT, previous)
        if pump is not None and not ended:
            pump.finish(drain=False)


def _idle(pump: LogPump | None, ints: Interrupts) -> Callable[[], None] | None:
    """What the long poll does while no answer came: copy the log, with Ctrl-C held off while it
    copies (a press in between is acted on right after, as one during the read is)."""
    if pump is None:
        return None

    def idle() -> None:
        ints.blocking = False
        pump.pump()
        if ints.report or ints.stop:
            raise _Woken
        ints.blocking = True

    return idle


def _running(pod: dict[str, Any], uid: str) -> bool:
    return bool(pod) and pod["uid"] == uid and pod["phase"] not in ("Succeeded", "Failed")


def _get(session: Session, path: str, query: dict[str, str] | None, timeout: float,
         idle: Callable[[], None] | None = None, idle_s: float = POLL_S) -> dict[str, Any]:
    """The pod as ``ps`` shows it; {} once it is gone. ``idle``: what the long poll does every
    ``idle_s`` while it waits (``_idle``)."""
    try:
        pod = session.request("GET", path, query=query, timeout=timeout, idle=idle, idle_s=idle_s)["pod"]
    except CommandError as e:
        if e.code == EXIT_NOT_FOUND:
            return {}
        raise
    for key in ("record", "cgroup", "cgroup_dirs"):  # describe's; the job's JSON is ps's shape
        pod.pop(key, None)
    for c in pod["containers"]:
        c.pop("cgroup", None)
        c.pop("pids", None)
    return pod


def log_offset(path: str | Path) -> int:
    """Bytes already in a log file (an earlier pod of the same name): where streaming starts."""
    import os

    try:
        return os.stat(path, follow_symlinks=False).st_size
    except OSError:
        return 0
