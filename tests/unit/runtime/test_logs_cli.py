"""`hwagent logs`: which file, clear errors, and -f across a rotation."""

from __future__ import annotations

import io
import os
import threading
import time

from agent.cli import main
from agent.commands.logs import follow


def test_logs_prints_the_container_log_and_names_choices(tmp_path, capsys):
    d = tmp_path / "logs" / "ns_web"
    d.mkdir(parents=True)
    (d / "main.log").write_text("hello\n")
    (d / "main.log.1").write_text("older\n")
    assert main(["logs", "--root-dir", str(tmp_path), "ns/web"]) == 0
    assert capsys.readouterr().out == "hello\n"
    assert main(["logs", "--root-dir", str(tmp_path), "-n", "ns", "web", "--previous-files"]) == 0
    assert capsys.readouterr().out == "older\nhello\n"
    (d / "side.log").write_text("x\n")
    assert main(["logs", "--root-dir", str(tmp_path), "ns/web"]) == 2
    assert "has containers main, side: choose one with -c" in capsys.readouterr().err
    assert main(["logs", "--root-dir", str(tmp_path), "ns/web", "-c", "nope"]) == 3
    assert "no container 'nope'" in capsys.readouterr().err


def test_a_missing_pod_is_exit_3_and_reads_as_describe_says_it(tmp_path, capsys):
    """docs/commands/README.md: 3 is "no such pod" (it was 2, the usage status)."""
    (tmp_path / "logs").mkdir()
    assert main(["logs", "--root-dir", str(tmp_path), "ns/other"]) == 3
    err = capsys.readouterr().err
    assert "no pod ns/other" in err and "hwagent ps" in err, err


def test_follow_keeps_reading_across_rotation(tmp_path):
    log = tmp_path / "main.log"
    log.write_bytes(b"one\n")
    out = io.BytesIO()
    stop = threading.Event()
    t = threading.Thread(target=follow, args=(log, out, 0.01, stop.is_set))
    t.start()
    try:
        with open(log, "ab") as f:
            f.write(b"two\n")
        deadline = time.monotonic() + 30
        while b"two" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.rename(log, tmp_path / "main.log.1")  # what the shim does when the file is full
        log.write_bytes(b"three\n")
        while b"three" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        t.join(10)
    assert out.getvalue() == b"one\ntwo\nthree\n"



S = 1_000_000_000


def _shim_writes(d, name: str, chunks: list[tuple[bytes, int]]) -> None:
    """Append chunks to <name>.log and their arrival times to <name>.times, as the shim does."""
    from agent.runtime.logtimes import RECORD

    log, times = d / f"{name}.log", d / f"{name}.times"
    with open(log, "ab") as f, open(times, "ab") as t:
        for data, ns in chunks:
            t.write(RECORD.pack(f.tell(), ns))
            f.write(data)


def test_tail_since_and_timestamps(tmp_path, capsys):
    d = tmp_path / "logs" / "default_web"
    d.mkdir(parents=True)
    now = time.time_ns()
    _shim_writes(d, "main", [(b"old-1\nold-2\n", now - 3600 * S), (b"new-1\n", now - 10 * S), (b"new-2\n", now - 1 * S)])
    base = ["logs", "--root-dir", str(tmp_path), "web"]
    assert main([*base]) == 0
    assert capsys.readouterr().out == "old-1\nold-2\nnew-1\nnew-2\n"  # the log as written, no times
    assert main([*base, "--tail", "2"]) == 0
    assert capsys.readouterr().out == "new-1\nnew-2\n"
    assert main([*base, "--since", "5m"]) == 0
    assert capsys.readouterr().out == "new-1\nnew-2\n"
    assert main([*base, "--since", "5m", "--tail", "1", "--timestamps"]) == 0
    from agent.runtime.logtimes import rfc3339

    assert capsys.readouterr().out == f"{rfc3339(now - 1 * S)} new-2\n"
    assert main([*base, "-t", "--tail", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{rfc3339(now - 3600 * S)} old-2", f"{rfc3339(now - 10 * S)} new-1", f"{rfc3339(now - 1 * S)} new-2"]


def test_lines_without_a_recorded_time_say_so(tmp_path, capsys):
    d = tmp_path / "logs" / "default_web"
    d.mkdir(parents=True)
    (d / "main.log").write_bytes(b"before\n")  # an older shim kept no times file
    base = ["logs", "--root-dir", str(tmp_path), "web"]
    assert main([*base, "--timestamps"]) == 0
    assert capsys.readouterr().out == "- before\n"
    assert main([*base, "--since", "1h"]) == 0
    assert capsys.readouterr().out == ""


def test_bad_tail_and_since_are_refused(tmp_path, capsys):
    d = tmp_path / "logs" / "default_web"
    d.mkdir(parents=True)
    (d / "main.log").write_bytes(b"x\n")
    base = ["logs", "--root-dir", str(tmp_path), "web"]
    assert main([*base, "--since", "yesterday"]) == 2
    assert "give a duration (90s, 5m, 1h30m, 2d) or an RFC 3339 time" in capsys.readouterr().err
    assert main([*base, "--tail", "-1"]) == 2
    assert "--tail" in capsys.readouterr().err


def test_previous_files_with_times_and_no_times_file_printed(tmp_path, capsys):
    d = tmp_path / "logs" / "default_web"
    d.mkdir(parents=True)
    _shim_writes(d, "main", [(b"a\n", 1 * S)])
    os.rename(d / "main.log", d / "main.log.1")
    os.rename(d / "main.times", d / "main.times.1")
    _shim_writes(d, "main", [(b"b\n", 2 * S)])
    base = ["logs", "--root-dir", str(tmp_path), "web", "--previous-files"]
    assert main(base) == 0
    assert capsys.readouterr().out == "a\nb\n"
    assert main([*base, "-t"]) == 0
    assert capsys.readouterr().out == "1970-01-01T00:00:01.000000000Z a\n1970-01-01T00:00:02.000000000Z b\n"
    assert main([*base, "--tail", "1"]) == 0
    assert capsys.readouterr().out == "b\n"


def test_follow_with_timestamps_stamps_new_lines_across_rotation(tmp_path):
    from agent.commands.logs import follow_lines
    from agent.runtime.logtimes import rfc3339

    _shim_writes(tmp_path, "main", [(b"one\n", 1 * S)])
    log = tmp_path / "main.log"
    out = io.BytesIO()
    stop = threading.Event()
    t = threading.Thread(target=follow_lines, args=(log, out, log.stat().st_size, True, 0.01, stop.is_set))
    t.start()
    deadline = time.monotonic() + 30
    try:
        _shim_writes(tmp_path, "main", [(b"tw", 2 * S), (b"o\n", 3 * S)])
        while b"two" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.rename(log, tmp_path / "main.log.1")
        os.rename(tmp_path / "main.times", tmp_path / "main.times.1")
        _shim_writes(tmp_path, "main", [(b"three\n", 4 * S)])
        while b"three" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        t.join(10)
    assert out.getvalue().decode() == f"{rfc3339(2 * S)} two\n{rfc3339(4 * S)} three\n"


def test_a_times_file_made_after_its_log_was_opened_still_stamps_the_lines(tmp_path):
    """Right after a rotation the shim makes the new log a moment before its times file: a
    follower that opened the log in between finds the times file when the lines come."""
    from agent.commands.logs import _TimedTail
    from agent.runtime.logtimes import rfc3339

    log = tmp_path / "main.log"
    log.touch()  # the new log, its times file not made yet
    tail = _TimedTail(log, 0)
    out = io.BytesIO()
    try:
        assert tail.pump(out) == 0  # opened, nothing to read
        _shim_writes(tmp_path, "main", [(b"three\n", 4 * S)])  # times file made, record, then the bytes
        assert tail.pump(out) > 0
    finally:
        tail.close()
    assert out.getvalue().decode() == f"{rfc3339(4 * S)} three\n"
