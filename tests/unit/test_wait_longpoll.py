"""`launch --wait` asks the daemon with a long poll (``?wait=terminal``), not every 0.2 s, and
streams the log meanwhile, between the long poll's reads on the main thread (issue 23)."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest

from agent.commands._wait import OutputLost, wait_for
from agent.commands.logs import Tail


def _pod(phase: str, uid: str = "u1") -> dict[str, Any]:
    c = {"name": "main", "kind": "app", "state": "terminated" if phase == "Succeeded" else "running",
         "reason": "Completed" if phase == "Succeeded" else "", "exit_code": 0 if phase == "Succeeded" else None,
         "pid": None, "restart_count": 0}
    return {"namespace": "default", "name": "j", "uid": uid, "phase": phase, "reason": "", "containers": [c]}


class FakeSession:
    """Answers each GET with the next pod; each answer is one long poll that ran to its timeout
    (Running) or saw the end (Succeeded)."""

    def __init__(self, answers: list[dict[str, Any]], log: Path | None = None, out: io.BytesIO | None = None) -> None:
        self.answers = answers
        self.out = out
        self.streamed = b""
        self.calls: list[tuple[str, str, dict[str, str] | None]] = []
        self.log = log

    def request(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None,
                timeout: float = 0, **idle: Any) -> dict[str, Any]:
        self.calls.append((method, path, query))
        pod = self.answers.pop(0)
        self.idle = idle
        if pod["phase"] == "Running" and self.log is not None:  # the job writes while the poll waits
            with self.log.open("ab") as f:
                f.write(b"middle\n")
            assert idle.get("idle") is not None, "the long poll was given nothing to do while it waits"
            idle["idle"]()
            self.streamed = self.out.getvalue() if self.out is not None else b""
        if self.log is not None and pod["phase"] == "Succeeded":
            with self.log.open("ab") as f:
                f.write(b"last line\n")
        return {"pod": pod}

    def reset(self) -> None:
        pass


def test_each_status_request_is_a_long_poll_until_the_pod_ends():
    s = FakeSession([_pod("Running"), _pod("Running"), _pod("Succeeded")])
    code, why, pod = wait_for(s, "default", "j", "u1", "main", None, out=io.BytesIO(), err=io.StringIO())  # type: ignore[arg-type]
    assert code == 0 and pod["phase"] == "Succeeded", (code, why)
    assert len(s.calls) == 3, s.calls  # one request per wait, however long the job runs
    for method, path, query in s.calls:
        assert (method, path) == ("GET", "/v1/pods/default/j")
        assert query == {"wait": "terminal", "timeout": "30", "summary": "1"}, query


def test_the_log_streams_while_waiting_and_its_last_bytes_come_before_the_answer(tmp_path):
    log = tmp_path / "main.log"
    log.write_bytes(b"first\n")
    out = io.BytesIO()
    s = FakeSession([_pod("Running"), _pod("Succeeded")], log)
    code, _why, _pod_ = wait_for(s, "default", "j", "u1", "main", Tail(log), out=out, err=io.StringIO(),  # type: ignore[arg-type]
                                 poll_s=0.01)
    assert code == 0
    assert out.getvalue() == b"first\nmiddle\nlast line\n", out.getvalue()


def test_a_pod_replaced_or_removed_while_waiting_is_lost():
    s = FakeSession([_pod("Running", uid="other")])
    code, why, _ = wait_for(s, "default", "j", "u1", "main", None, out=io.BytesIO(), err=io.StringIO())  # type: ignore[arg-type]
    assert code != 0 and "replaced" in why, why


def test_the_log_is_pumped_between_the_long_polls_reads_with_no_thread(tmp_path):
    log = tmp_path / "main.log"
    log.write_bytes(b"first\n")
    out = io.BytesIO()
    s = FakeSession([_pod("Running"), _pod("Succeeded")], log, out)
    before = threading.active_count()
    code, _why, _pod_ = wait_for(s, "default", "j", "u1", "main", Tail(log), out=out, err=io.StringIO(),  # type: ignore[arg-type]
                                 poll_s=0.01)
    assert code == 0
    assert s.streamed == b"first\nmiddle\n", s.streamed  # before the answer came
    assert out.getvalue() == b"first\nmiddle\nlast line\n", out.getvalue()
    assert threading.active_count() == before


class _ClosedPipe(io.BytesIO):
    def write(self, data: Any) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_reader_gone_stops_the_stream_not_the_wait_and_the_end_comes_with_the_error(tmp_path):
    log = tmp_path / "main.log"
    log.write_bytes(b"first\n")
    s = FakeSession([_pod("Running"), _pod("Running"), _pod("Succeeded")], log)
    with pytest.raises(OutputLost) as lost:
        wait_for(s, "default", "j", "u1", "main", Tail(log), out=_ClosedPipe(), err=io.StringIO(),  # type: ignore[arg-type]
                 poll_s=0.01)
    assert len(s.calls) == 3, "the wait went on to the pod's end"
    assert (lost.value.code, lost.value.pod["phase"]) == (0, "Succeeded")
    assert isinstance(lost.value.error, BrokenPipeError)
