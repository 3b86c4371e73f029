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
    assert main(["logs", "--root-dir", str(tmp_path), "ns/web", "-c", "nope"]) == 2
    assert "no container 'nope'" in capsys.readouterr().err
    assert main(["logs", "--root-dir", str(tmp_path), "ns/other"]) == 2
    assert "no logs for pod ns/other" in capsys.readouterr().err


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

