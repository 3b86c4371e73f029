"""exec's pipe relay (agent.commands._piperelay) on its own, without a daemon or a pod: the
command runs in a session of its own with nothing of the caller's but pipes, and the relay
keeps what running it in place gave (output bytes, stdin and its end, the exit status or
the signal, Ctrl-C's SIGINT). The attack it answers (issue 32 item 2) is run for real by
tests/security/test_exec_terminal.py."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

#: runs run_with_pipes(no setup, argv, this environment) in a fresh interpreter; argv follows
_RELAY = ("import os, sys\n"
          "from agent.commands._piperelay import run_with_pipes\n"
          "for fd in map(int, filter(None, os.environ.pop('CLOSE_FDS', '').split(','))):\n"
          "    os.close(fd)\n"
          "if os.environ.pop('NO_PIDFD', ''):  # a kernel before 5.3\n"
          "    def no_pidfd(pid, flags=0):\n"
          "        raise OSError(38, 'ENOSYS')\n"
          "    os.pidfd_open = no_pidfd\n"
          "sys.exit(run_with_pipes(lambda: None, sys.argv[1:], dict(os.environ)))\n")


def _relay(*argv: str, stdin: bytes | None = b"", env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _RELAY, *argv], input=stdin, capture_output=True, timeout=60,
                          env={**os.environ, **(env or {})}, **kw)


@pytest.mark.parametrize("pidfd", [True, False])
def test_output_stdin_and_exit_status_pass_through_byte_for_byte(pidfd):
    blob = bytes(range(256)) * 4096  # 1 MiB of every byte value: many pipe-fulls each way
    r = _relay("sh", "-c", "cat; printf 'e\\0rr' >&2; exit 7", stdin=blob, env={} if pidfd else {"NO_PIDFD": "1"})
    assert (r.returncode, r.stdout, r.stderr) == (7, blob, b"e\0rr"), (r.returncode, len(r.stdout), r.stderr)


def test_a_command_that_never_reads_its_stdin_still_ends():
    r = _relay("true", stdin=b"x" * (4 << 20))
    assert r.returncode == 0, r


_REPORT = ("import json, os\n"
           "fds = {}\n"
           "for f in os.listdir('/proc/self/fd'):\n"
           "    try:\n"
           "        fds[f] = os.readlink('/proc/self/fd/' + f)\n"
           "    except OSError:\n"
           "        pass\n"
           "tty = open('/proc/self/stat').read().rsplit(')', 1)[1].split()[4]\n"
           "print(json.dumps({'sid': os.getsid(0), 'pgid': os.getpgid(0), 'pid': os.getpid(), 'tty': int(tty), "
           "'fds': fds}))\n")


def test_the_command_has_its_own_session_and_no_descriptor_but_its_pipes():
    import json

    r = _relay(sys.executable, "-c", _REPORT)
    assert r.returncode == 0, r
    rep = json.loads(r.stdout)
    assert rep["sid"] == rep["pgid"] == rep["pid"] != os.getsid(0), rep
    assert rep["tty"] == 0, "no controlling terminal"
    assert sorted(rep["fds"]) == ["0", "1", "2"] and all(v.startswith("pipe:") for v in rep["fds"].values()), rep


def test_a_descriptor_the_caller_passed_does_not_reach_the_command(tmp_path):
    secret = tmp_path / "held"
    secret.write_text("the caller's")
    fd = os.open(secret, os.O_RDONLY)
    try:
        os.set_inheritable(fd, True)
        r = _relay("sh", "-c", f"test -e /proc/$$/fd/{fd} && cat /proc/$$/fd/{fd} || echo closed", pass_fds=(fd,))
    finally:
        os.close(fd)
    assert r.stdout == b"closed\n", r


def test_closed_caller_stdio_is_read_as_empty_and_the_pipes_stay_in_place():
    r = subprocess.run([sys.executable, "-c", _RELAY, "sh", "-c", "cat; echo out; echo err >&2"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                       env={**os.environ, "CLOSE_FDS": "0"})
    assert (r.returncode, r.stdout, r.stderr) == (0, b"out\n", b"err\n"), r


def test_a_command_killed_by_sigterm_ends_the_relay_with_it_and_another_signal_is_128_plus_n():
    assert _relay("sh", "-c", "kill -TERM $$").returncode == -signal.SIGTERM
    assert _relay("sh", "-c", "kill -USR1 $$").returncode == 128 + signal.SIGUSR1


def test_sigint_to_the_relay_reaches_the_commands_process_group():
    script = 'trap "echo got-int; exit 5" INT; echo ready; while :; do sleep 0.1; done'
    p = subprocess.Popen([sys.executable, "-c", _RELAY, "sh", "-c", script], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        p.send_signal(signal.SIGINT)
        assert p.stdout.readline() == b"got-int\n"
        assert p.wait(60) == 5
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_reader_that_goes_away_gives_the_command_sigpipe():
    t0 = time.monotonic()
    r = subprocess.run(f"{sys.executable} -c {shlex.quote(_RELAY)} cat /dev/zero | head -c 1000000 | wc -c", shell=True,
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "1000000" and time.monotonic() - t0 < 60, r


@pytest.mark.parametrize("ignored", [True, False])
def test_a_signal_the_caller_ignored_is_not_passed_on(ignored):
    """A script's background job starts with SIGINT ignored: the relay leaves it so (the command
    does not get it either), else it forwards it."""
    script = 'trap "echo got-int; exit 5" INT; echo ready; sleep 2; echo timeout'
    pre = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None
    p = subprocess.Popen([sys.executable, "-c", _RELAY, "sh", "-c", script], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, preexec_fn=pre)
    try:
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        p.send_signal(signal.SIGINT)
        assert p.stdout.readline() == (b"timeout\n" if ignored else b"got-int\n")
        assert p.wait(60) == (0 if ignored else 5)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
