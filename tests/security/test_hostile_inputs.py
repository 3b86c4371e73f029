"""Files and requests that would hang or swamp the CLI or the daemon (issue 32's security tier,
issue 37 items 10 and 11): ``--env-file`` and ``-f`` naming a FIFO or ``/dev/zero``, a
100 MB manifest, a request body the daemon refuses, and a pod log replaced by a FIFO.

Each is tried as alice against a real daemon, with a deadline so that a hang fails the
test instead of blocking the run, and a memory cap so that a CLI reading ``/dev/zero`` to
its end fails rather than swamps the machine. Each must be refused at once with a message
that says what is wrong (and, for a size, the limit), and nothing is admitted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.limits import MAX_MANIFEST_BYTES
from tests.security.support import ALICE, as_user, home, security_box, until, write_as
from tests.users_support import HWAGENT, Box

pytestmark = pytest.mark.timeout(300)

CLI_TIMEOUT_S = 30
#: the CLI's address space while it is tried: /dev/zero read to its end hits this, not the machine
CLI_AS_BYTES = 2 << 30
LIMIT_WORDS = (f"{MAX_MANIFEST_BYTES} bytes", "1 MiB")


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    # a socket group of this module's own: another run's box that removes a shared "hwagent" group
    # at its end would take alice's membership with it
    yield from security_box(group=f"hwsg{uuid.uuid4().hex[:8]}")


def alice_cli(box: Box, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The CLI as alice in her home, killed after CLI_TIMEOUT_S (a hang: exit 137)."""
    argv = ["prlimit", f"--as={CLI_AS_BYTES}", "--", "timeout", "-s", "KILL", str(CLI_TIMEOUT_S),
            str(HWAGENT), args[0], "--root-dir", str(box.root), *args[1:]]
    if stdin is not None:
        argv = ["sh", "-c", f'exec "$@" < {stdin}', "sh", *argv]
    return as_user(ALICE, *argv, timeout=CLI_TIMEOUT_S + 30)


def refused(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode != 137, f"the CLI hung: {r.stderr}"
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr and "stopped answering" not in r.stderr, \
        r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def has_limit(r: subprocess.CompletedProcess) -> None:
    assert any(w in r.stderr for w in LIMIT_WORDS), r.stderr


@pytest.fixture(scope="module")
def fifo(box) -> Path:
    path = home(ALICE) / "a-fifo"
    if not path.exists():
        os.mkfifo(path, 0o644)
        pw = os.stat(home(ALICE))
        os.chown(path, pw.st_uid, pw.st_gid)
    return path


@pytest.fixture(scope="module")
def huge(box) -> Path:
    """100 MB (sparse: no disk) of alice's."""
    path = write_as(ALICE, home(ALICE) / "huge.yaml", b"")
    os.truncate(path, 100 * 1000 * 1000)
    return path


@pytest.mark.parametrize("flag", ["--env-file", "-f", "admit"])
@pytest.mark.parametrize("what", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_is_refused_at_once(box, fifo, flag, what):
    """A FIFO is no file (opening it waited for a writer); a device is read without blocking
    to the manifest limit (/dev/zero was read without end)."""
    path = str(fifo) if what == "fifo" else what
    if flag == "--env-file":
        r = alice_cli(box, "launch", "--name", "envfile", "--env-file", path, "--", "/bin/true")
    elif flag == "-f":
        r = alice_cli(box, "launch", "-f", path)
    else:
        r = alice_cli(box, "admit", path)
    if what == "fifo":
        refused(r, path, "not a regular file")
    else:
        refused(r, path)
        has_limit(r)
    assert box.pod("envfile", ALICE) is None


@pytest.mark.parametrize("flag", ["--env-file", "-f", "admit", "-f -"])
def test_a_100mb_file_is_refused_with_the_limit(box, huge, flag):
    if flag == "--env-file":
        r = alice_cli(box, "launch", "--name", "envfile", "--env-file", str(huge), "--", "/bin/true")
    elif flag == "-f":
        r = alice_cli(box, "launch", "-f", str(huge))
    elif flag == "admit":
        r = alice_cli(box, "admit", str(huge))
    else:
        r = alice_cli(box, "launch", "-f", "-", stdin=str(huge))
    refused(r)
    has_limit(r)
    assert box.pod("envfile", ALICE) is None


def test_dev_zero_on_stdin_is_cut_at_the_limit(box):
    r = alice_cli(box, "launch", "-f", "-", stdin="/dev/zero")
    refused(r)
    has_limit(r)


CLIENT = """
import sys
from agent.commands._admission import _Connection
status, body = _Connection(sys.argv[1]).exchange("POST", "/v1/pods", b" " * int(sys.argv[2]), 30)
print(status, body.decode())
"""


def test_the_daemon_answers_413_with_its_limit_to_an_oversized_body(box):
    """The CLI's own client, sending past the limit (as an older or another client would): it reads
    the daemon's 413, which names the limit, instead of failing on the closed connection."""
    r = as_user(ALICE, sys.executable, "-c", CLIENT, str(box.root / "cli.sock"), str(100 * 1000 * 1000),
                timeout=CLI_TIMEOUT_S, cwd=str(Path(__file__).resolve().parents[2]))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("413 "), r.stdout
    assert str(MAX_MANIFEST_BYTES) in r.stdout, r.stdout


def test_a_fifo_in_place_of_a_running_pods_log_hangs_no_reader(box):
    """alice owns her pod's log directory: she swaps main.log for a FIFO while her job runs. Her own
    ``launch --wait`` (which follows the log across rotations) and root's ``hwagent logs`` used to
    open it and wait forever for a writer (or end in ``OSError: Illegal seek``); now each says it is
    not a regular file, and the wait still ends with the job's exit status."""
    argv = ["runuser", "-u", ALICE, "--", "timeout", "-s", "KILL", str(CLI_TIMEOUT_S), str(HWAGENT), "launch",
            "--root-dir", str(box.root), "--wait", "--name", "fifolog", "--", "sh", "-c", "echo one; sleep 4; exit 3"]
    waiter = subprocess.Popen(argv, cwd=str(home(ALICE)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = box.root / "logs" / "default_fifolog" / "main.log"
        until(lambda: log.exists() and log.stat().st_size > 0, "the job's log")
        assert as_user(ALICE, "sh", "-c", f"rm -f {log} && mkfifo {log}").returncode == 0
        r = subprocess.run(["timeout", "-s", "KILL", str(CLI_TIMEOUT_S), str(HWAGENT), "logs", "--root-dir",
                            str(box.root), "fifolog"], capture_output=True, text=True, timeout=CLI_TIMEOUT_S + 30)
        assert r.returncode != 137, "root's hwagent logs hung on alice's FIFO"
        assert r.returncode != 0 and "not a regular file" in r.stderr and "Traceback" not in r.stderr, r.stderr
        _, err = waiter.communicate(timeout=CLI_TIMEOUT_S + 30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode != 137, f"alice's launch --wait hung: {err}"
    assert "Traceback" not in err and "Illegal seek" not in err, err
    assert waiter.returncode == 3, (waiter.returncode, err)
    assert "not a regular file" in err, err
    box.cli(ALICE, "rm", "fifolog")
