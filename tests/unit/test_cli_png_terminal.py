"""`hwagent topology --format png` to a terminal refuses instead of printing binary.

A PNG written to a terminal is a screenful of control bytes that can leave the
terminal in a bad state; the command says to give -o FILE or a pipe instead,
as `curl` does for binary output.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run_on_a_terminal(argv: list[str], cwd: Path, deadline_s: float = 120.0) -> tuple[int, bytes, bytes]:
    """Run ``argv`` with its stdout on a pty, reading the terminal as it goes (a full pty
    would block the child): (exit status, what reached the terminal, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE, cwd=cwd)
    os.close(slave)
    written = b""
    end = time.monotonic() + deadline_s
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed its side
                    chunk = b""
                written += chunk
                if chunk:
                    continue
            if proc.poll() is not None:
                break
        assert proc.stderr is not None
        err = proc.stderr.read()
        return proc.wait(timeout=10), written, err
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_png_to_a_terminal_is_refused(tmp_path):
    rc, written, err = _run_on_a_terminal(
        [sys.executable, "-m", "agent", "topology", "--format", "png", "--no-live"], tmp_path)
    assert b"\x89PNG" not in written, f"{len(written)} bytes of PNG went to the terminal"
    assert rc == 2, err
    assert written == b""
    assert b"-o FILE" in err and b"terminal" in err


def test_png_to_a_file_or_pipe_is_written(tmp_path):
    out = tmp_path / "m.png"
    proc = subprocess.run([sys.executable, "-m", "agent", "topology", "--format", "png", "--no-live", "-o", str(out)],
                          capture_output=True, cwd=tmp_path, timeout=120)
    if proc.returncode != 0 and b"rsvg-convert" in proc.stderr:
        import pytest

        pytest.skip("no PNG renderer (rsvg-convert) here")
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes().startswith(b"\x89PNG")
