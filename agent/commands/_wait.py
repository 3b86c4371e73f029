"""`launch --wait`: follow a pod to its end, streaming its main container's output, and answer
with its exit status; Ctrl-C as srun has it.

The pod is polled (``Get``, every ``POLL_S``) on one channel while its log file
is tailed; a status poll is a few hundred bytes and keeps the client free of
threads, so Ctrl-C lands in the main thread between two polls. srun's habit:
the first Ctrl-C prints where the job is and what a second one does; a second
within ``INTERRUPT_WINDOW_S`` stops the pod (SIGTERM, its grace period, then
kill, as ``hwagent stop``) and the wait goes on to the pod's end, so a job is
never left running unseen behind a prompt.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO

from agent.cli import CommandError
from agent.commands._admission import Session, pod_path
from agent.commands._exitcodes import EXIT_LOST, EXIT_NOT_FOUND
from agent.commands._job import main_container, outcome
from agent.commands._podstatus import status_word
from agent.commands.logs import Tail

__all__ = ["wait_for", "Interrupts", "POLL_S", "INTERRUPT_WINDOW_S"]

POLL_S = 0.2
INTERRUPT_WINDOW_S = 1.0


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

    def handler(self, _signum: int, _frame: FrameType | None) -> None:
        self.press()


def _state_line(pod: dict[str, Any], main: str | None) -> str:
    c = main_container(pod, main) or {}
    pid = f", pid {c['pid']}" if c.get("pid") else ""
    return f"{pod['namespace']}/{pod['name']} is {status_word(pod)}{pid}"


def wait_for(session: Session, namespace: str, name: str, uid: str, main: str | None, tail: Tail | None,
             out: BinaryIO | None = None, err: Any = None, poll_s: float = POLL_S) -> tuple[int, str, dict[str, Any]]:
    """Wait for pod ``namespace/name`` (uid ``uid``) to end: (exit status, the line explaining it, the pod)."""
    path = pod_path(namespace, name)
    out = out or sys.stdout.buffer
    err = err or sys.stderr
    ints = Interrupts()
    previous = signal.signal(signal.SIGINT, ints.handler)
    try:
        while True:
            if tail is not None:
                tail.pump(out)
            try:
                pod = session.request("GET", path, timeout=30)["pod"]
                pod.pop("record", None)  # describe's; the job's JSON is ps's shape
            except CommandError as e:
                if e.code == EXIT_NOT_FOUND:
                    return EXIT_LOST, f"{namespace}/{name} was removed before it ended", {}
                raise
            if pod["uid"] != uid:
                return EXIT_LOST, f"{namespace}/{name} was removed (a pod of that name replaced it)", pod
            if pod["phase"] in ("Succeeded", "Failed"):
                if tail is not None:
                    tail.pump(out)  # what the shim wrote before the container ended
                code, why = outcome(pod, main)
                return code, why, pod
            if ints.stop:
                ints.stop = ints.report = False
                print(f"hwagent: stopping {pod['namespace']}/{pod['name']} (SIGTERM, then kill after its grace "
                      "period)", file=err, flush=True)
                session.request("POST", pod_path(namespace, name, "stop"), {}, timeout=86400 + 60)
                continue
            if ints.report:
                ints.report = False
                print(f"hwagent: {_state_line(pod, main)}; press Ctrl-C again within 1 s to stop it",
                      file=err, flush=True)
            time.sleep(poll_s)
    finally:
        signal.signal(signal.SIGINT, previous)
        if tail is not None:
            tail.close()


def log_offset(path: Path) -> int:
    """Bytes already in a log file (an earlier pod of the same name): where streaming starts."""
    import os

    try:
        return os.stat(path, follow_symlinks=False).st_size
    except OSError:
        return 0
