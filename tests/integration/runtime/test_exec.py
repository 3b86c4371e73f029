"""`hwagent exec NAME [-c C] -- CMD` on a real daemon with the runtime on (issue 23): the
command runs in the container's cgroups (so on its CPUs), with its stdio and exit status, the
container's environment and working directory (-e over it), and with -t on a terminal of its own
relayed in raw mode; a container's own mount namespace is entered."""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

from agent.cgroups.config import derived_reclaimed_subtree
from tests.integration.runtime.test_end_to_end import BUDGET_S, HWAGENT

from tests.integration.runtime.test_end_to_end import until
from tests.integration.runtime.test_jobs import job  # noqa: F401 - the module's daemon
from tests.integration.runtime.test_signal_describe import _running

pytestmark = pytest.mark.timeout(300)


def _described(j, name: str) -> dict:
    d = j.cli("describe", name, "--format", "json")
    assert d.returncode == 0, d.stderr
    return json.loads(d.stdout)


def test_exec_joins_the_containers_cgroups_cpus_and_exit_status(job):  # noqa: F811
    r = job.cli("launch", "--name", "ex", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    _running(job, "ex")
    p = until(lambda: (q := _described(job, "ex")) and q["containers"][0]["pids"] and q, "the container's pid")
    c = p["containers"][0]
    e = job.cli("exec", "ex", "--", "cat", "/proc/self/cgroup")
    assert e.returncode == 0, e.stderr
    lines = e.stdout.splitlines()
    # every hierarchy the kernel lists for the exec'd process is the container's own cgroup
    assert lines and all(line.split(":", 2)[2] == c["cgroup"] for line in lines if ":cpuset:" in line
                         or line.startswith("0::")), e.stdout
    assert any(":cpuset:" in line and line.endswith(c["cgroup"]) for line in lines), e.stdout
    e = job.cli("exec", "ex", "-c", "main", "--", "sh", "-c", "grep Cpus_allowed_list /proc/self/status")
    assert e.returncode == 0, e.stderr
    mine = open(f"/proc/{c['pids'][0]}/status").read()
    want = next(x for x in mine.splitlines() if x.startswith("Cpus_allowed_list"))
    assert e.stdout.strip() == want, (e.stdout, want)
    e = job.cli("exec", "ex", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert e.returncode == 7 and e.stdout == "out\n" and e.stderr == "err\n", e
    job.cli("stop", "ex", "--grace", "0")


def test_a_reclaimed_pod_is_described_and_exec_joins_it_in_the_reclaimed_subtree(job):  # noqa: F811
    """Issue 26: a reclaimed pod's cgroups are in the runtime's reclaimed subtree (derived from
    the job's runtime subtree); describe names them there and exec joins them there."""
    r = job.cli("launch", "--name", "exrec", "--qos", "reclaimed", "--cpu-request", "100m", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    _running(job, "exrec")
    p = until(lambda: (q := _described(job, "exrec")) and q["containers"][0]["pids"] and q, "the container's pid")
    reclaimed = derived_reclaimed_subtree(job.subtree)
    assert p["cgroup"] == f"{reclaimed}/pod{p['uid']}" and p["containers"][0]["cgroup"] == f"{p['cgroup']}/main"
    assert p["cgroup_dirs"] and all(d.endswith(p["cgroup"]) for d in p["cgroup_dirs"]), p["cgroup_dirs"]
    e = job.cli("exec", "exrec", "--", "cat", "/proc/self/cgroup")
    assert e.returncode == 0, e.stderr
    assert any(":cpu" in line and line.endswith(f"{reclaimed}/pod{p['uid']}/main") for line in e.stdout.splitlines()), e.stdout
    job.cli("stop", "exrec", "--grace", "0")


def test_exec_refusals_say_what_to_do(job):  # noqa: F811
    r = job.cli("exec", "nosuchpod", "--", "true")
    assert r.returncode == 3 and "nosuchpod" in r.stderr and "hwagent ps" in r.stderr, r.stderr
    job.cli("launch", "--name", "exbad", "--", "sleep", "600")
    _running(job, "exbad")
    r = job.cli("exec", "exbad", "-c", "nosuch", "--", "true")
    assert r.returncode == 3 and "nosuch" in r.stderr and "main" in r.stderr, r.stderr
    r = job.cli("exec", "exbad")
    assert r.returncode == 2 and "CMD" in r.stderr, r.stderr
    job.cli("stop", "exbad", "--grace", "0")
    until(lambda: _described(job, "exbad")["phase"] in ("Succeeded", "Failed"), "the pod to end")
    r = job.cli("exec", "exbad", "--", "true")
    assert r.returncode == 1 and "runs nothing" in r.stderr, r.stderr


def test_exec_runs_with_the_containers_environment_and_directory(job, tmp_path):  # noqa: F811
    r = job.cli("launch", "--name", "exenv", "-e", "FOO=bar", "-w", "/tmp", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    _running(job, "exenv")
    until(lambda: _described(job, "exenv")["containers"][0]["pids"], "the container's pid")
    script = 'echo "$FOO $HWAGENT_POD_NAME ${LEAK-unset}"; pwd'
    env = {**os.environ, "LEAK": "from-the-caller"}
    argv = [str(HWAGENT), "exec", "--root-dir", str(job.root), "exenv"]
    e = subprocess.run([*argv, "--", "sh", "-c", script], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=BUDGET_S)
    assert e.returncode == 0, e.stderr
    assert e.stdout.splitlines() == ["bar exenv unset", "/tmp"], "the container's env and cwd, not the caller's"
    e = subprocess.run([*argv, "-e", "FOO=baz", "-e", "LEAK", "-w", "/", "--", "sh", "-c", script],
                       capture_output=True, text=True, env=env, timeout=BUDGET_S)
    assert e.returncode == 0, e.stderr
    assert e.stdout.splitlines() == ["baz exenv from-the-caller", "/"]
    job.cli("stop", "exenv", "--grace", "0")


def _read_until(fd: int, want: bytes, deadline: float, out: bytes = b"") -> bytes:
    """``out`` and what follows it on ``fd`` until ``want`` is in it: the terminal's bytes arrive in
    chunks of any size (under load the ^C echo and the trap's output come in one read)."""
    while want not in out:
        left = deadline - time.monotonic()
        assert left > 0, f"no {want!r} in {out!r}"
        if select.select([fd], [], [], left)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            out += chunk
    return out


def _ignore_int_and_quit() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)


@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs util-linux setsid")
def test_exec_tty_gives_a_terminal_relayed_in_raw_mode(job):  # noqa: F811
    r = job.cli("launch", "--name", "extty", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    _running(job, "extty")
    until(lambda: _described(job, "extty")["containers"][0]["pids"], "the container's pid")
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 77, 0, 0))
    before = termios.tcgetattr(slave)
    script = 'tty; stty size; trap "echo got-int; exit 5" INT; echo ready; while :; do sleep 0.1; done'
    # setsid -c: the CLI leads a session whose controlling terminal is the pty, as in a real terminal,
    # so a Ctrl-C that raw mode failed to pass on would go to the CLI, never to the command. The CLI
    # starts with SIGINT and SIGQUIT ignored, as a script's background job does: the command's new
    # terminal session must still start with them at their defaults, or its shell cannot trap INT
    proc = subprocess.Popen(["setsid", "-c", str(HWAGENT), "exec", "--root-dir", str(job.root), "-t", "extty",
                             "--", "sh", "-c", script], stdin=slave, stdout=slave, stderr=slave,
                            preexec_fn=_ignore_int_and_quit)
    try:
        deadline = time.monotonic() + BUDGET_S
        out = _read_until(master, b"ready", deadline)
        assert b"/dev/pts/" in out and b"33 77" in out, out
        os.write(master, b"\x03")
        # the pty's own line discipline echoes ^C as it signals the command's process group: the
        # relay passed the key through in raw mode (the CLI was not interrupted)
        out = _read_until(master, b"^C", deadline, out)
        out = _read_until(master, b"got-int", deadline, out)
        assert proc.wait(BUDGET_S) == 5, out
        assert termios.tcgetattr(slave) == before, "the caller's terminal settings are restored"
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        os.close(slave)
    job.cli("stop", "extty", "--grace", "0")


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_exec_enters_a_containers_own_mount_namespace(tmp_path):
    """The runtime gives a container a private mount namespace only when a device grant or CDI spec
    binds something into it; here one is made by hand (unshare -m, a tmpfs on a directory) and
    exec's entry step is run against its process: what the command sees is that namespace's."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               f"mount -t tmpfs none {mnt} && touch {mnt}/inside && echo up && exec sleep 600"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "up"
        assert not (mnt / "inside").exists(), "the mount is the namespace's own"
        code = ("import os, sys; from agent.commands.execpod import _enter_mounts; "
                f"_enter_mounts({holder.pid}); print(os.path.exists({str(mnt / 'inside')!r}))")
        r = subprocess.run([sys.executable,
                            "-c", code], capture_output=True, text=True, timeout=BUDGET_S)
        assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr
    finally:
        holder.kill()
        holder.wait()
