"""A local user in no group cannot keep the daemon from starting by holding its lock files
(issue 32 item 4's "no denial of service", found in review).

``flock`` needs no write access: any user who can open a file read-only can lock it. The
root dir's ``hwagent.pid`` (0644 in a 0711 root dir) and the machine-wide claim lock dir
(0755, files 0644) were such files: mallory opened them, waited on ``flock`` while the daemon
ran, got the locks the moment it stopped, and the next start failed with "another hwagent
(pid N) is running with root dir ..." (reproduced by hand against a daemon, restarted as
root). Here mallory holds, through a real ``runuser`` process, the files as an earlier
version left them (0644), and the daemon's own lock steps must still succeed; the files the
daemon makes now are closed to her."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from agent.daemon.claim import Claim, ClaimLock, lock_file_name
from agent.daemon.daemon import PidFile
from tests.security.support import MALLORY, open_box

pytestmark = [pytest.mark.timeout(120), pytest.mark.root]

#: holds an exclusive flock on each path it could open read-only, says "held N", then sleeps
HOLDER = ("import fcntl, os, sys, time\n"
          "n = 0\n"
          "for p in sys.argv[1:]:\n"
          "    try:\n"
          "        fd = os.open(p, os.O_RDONLY)\n"
          "        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
          "        n += 1\n"
          "    except OSError as e:\n"
          "        print(p, e.strerror, flush=True)\n"
          "print('held', n, flush=True)\n"
          "time.sleep(600)\n")


@pytest.fixture(scope="module")
def mallory() -> Iterator[str]:
    """mallory exists (a box makes her; its daemon is not used)."""
    gen = open_box(members=(), outsiders=(MALLORY,), group=f"hwsg{MALLORY[4:]}")
    next(gen)
    try:
        yield MALLORY
    finally:
        gen.close()


@pytest.fixture()
def place() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="hwsquat-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        subprocess.run(["rm", "-rf", str(d)], check=False)


@contextlib.contextmanager
def _hold(user: str, *paths: Path) -> Iterator[str]:
    """mallory's holder running (what it said), ended with its session at the end: killing
    runuser alone would leave her python holding the locks, and her account in use."""
    p = subprocess.Popen(["runuser", "-u", user, "--", sys.executable, "-S", "-c", HOLDER, *map(str, paths)],
                         stdout=subprocess.PIPE, text=True, cwd="/", start_new_session=True)
    assert p.stdout is not None
    try:
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            lines.append(line)
            if line.startswith("held") or not line:
                break
        assert lines[-1].startswith("held"), "the holder did not start: " + "".join(lines)
        yield "".join(lines)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()


def _old_file(path: Path, text: str) -> Path:
    """As an earlier hwagent left it: root's, 0644."""
    path.write_text(text)
    os.chmod(path, 0o644)
    return path


def test_a_pid_file_mallory_holds_does_not_stop_the_daemon(mallory: str, place: Path) -> None:
    pid_path = _old_file(place / "hwagent.pid", "12345\n")
    with _hold(mallory, pid_path) as said:
        assert "held 1" in said, said
        lock = PidFile(pid_path)
        lock.acquire()  # before the fix: DaemonError "another hwagent (pid 12345) is running ..."
        try:
            assert pid_path.read_text().strip() == str(os.getpid())
            assert pid_path.stat().st_mode & 0o777 == 0o600
            with _hold(mallory, pid_path) as again:
                assert "held 0" in again and "Permission denied" in again, again  # closed to her now
        finally:
            lock.release()


def test_claim_files_mallory_holds_do_not_stop_the_daemon(mallory: str, place: Path) -> None:
    locks = place / "locks"
    locks.mkdir(mode=0o755)
    root = "/sys/fs/cgroup"
    dead = Claim(999_999, "/var/lib/gone", root, ("/squat.slice",), CPUSet.parse("0"))
    claim_file = _old_file(locks / lock_file_name(root, "/squat.slice"), dead.to_json())
    dir_lock = _old_file(locks / ".lock", "")
    with _hold(mallory, dir_lock, claim_file) as said:
        assert "held 2" in said, said
        lock = ClaimLock(locks)
        # before the fix: ClaimConflict, the dir lock "stayed locked", or the dead daemon's claim "holds" it
        lock.acquire(Claim(os.getpid(), str(place / "root"), root, ("/squat.slice",), CPUSet.parse("0")))
        try:
            assert lock.held
            assert Claim.from_json(claim_file.read_text()).pid == os.getpid()
            assert (locks / ".lock").stat().st_mode & 0o777 == 0o600
        finally:
            lock.release()
