"""Issue 32 item 2: root's `hwagent exec` must not hand the pod's user root's terminal.

The attack (as the issue reproduced it): alice launches a pod whose PATH starts with her own
``~/bin``, where ``ps`` pushes a command line into every terminal it can reach with
``TIOCSTI``. Root, in an interactive shell, runs ``hwagent exec alicepod -- ps``; if any
process of the pod holds a descriptor of root's terminal (or has it as its controlling
terminal), the pushed line is read by root's shell when exec returns and runs as root.

Without ``-t`` the command must run in a session of its own with pipes for stdin, stdout and
stderr, relayed by the CLI (which stays outside the pod), as ``docker exec`` does; with ``-t``
its terminal is a pty of its own. Either way no descriptor of the caller's terminal reaches
the pod. The relay must keep what exec did before: the exit status, output (binary too),
stdin streamed from a pipe, EOF, and Ctrl-C reaching the command. And the root CLI never
runs with the container's environment (LD_PRELOAD and friends): it is applied only in the
command's final execve, after the drop to the pod's user.

Kernels from 6.2 can switch TIOCSTI off (``dev.tty.legacy_tiocsti=0``): the attack is only
shown where it is on, so the module turns it on for its run and puts it back.
"""

from __future__ import annotations

import json
import os
import pwd
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.support import ALICE, Box, home, security_box, write_as
from tests.users_support import HWAGENT
from tests.integration.runtime.test_end_to_end import BUDGET_S

pytestmark = pytest.mark.skipif(shutil.which("setsid") is None, reason="needs util-linux setsid")

_TIOCSTI_KNOB = Path("/proc/sys/dev/tty/legacy_tiocsti")

#: alice's ``ps``: pushes LINE into every descriptor it holds and into /dev/tty, and reports
#: what it could reach (its descriptors, its session, its controlling terminal, each TIOCSTI's outcome)
_PS = r'''#!/usr/bin/python3
import errno, fcntl, json, os, termios
LINE = os.environ.get("HW_LINE", "").encode() or open(os.path.expanduser("~/line")).read().encode()
stat = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
report = {"pid": os.getpid(), "sid": os.getsid(0), "tty_nr": int(stat[4]), "fds": {}, "sti": {}}
for name in os.listdir("/proc/self/fd"):
    try:
        report["fds"][name] = os.readlink("/proc/self/fd/" + name)
    except OSError:
        pass
targets = [(name, int(name)) for name in report["fds"]]
try:
    targets.append(("/dev/tty", os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)))
except OSError as e:
    report["sti"]["/dev/tty"] = "open: " + errno.errorcode.get(e.errno, str(e.errno))
for name, fd in targets:
    try:
        for b in LINE:
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([b]))
        report["sti"][name] = "pushed"
    except OSError as e:
        report["sti"][name] = errno.errorcode.get(e.errno, str(e.errno))
with open(os.path.expanduser("~/ps-report.json"), "w") as f:
    json.dump(report, f)
'''


@pytest.fixture(scope="module")
def tiocsti_on() -> Iterator[None]:
    """TIOCSTI as the kernel allowed it before 6.2, for this module only."""
    if not _TIOCSTI_KNOB.exists():
        yield
        return
    before = _TIOCSTI_KNOB.read_text().strip()
    if before != "1":
        _TIOCSTI_KNOB.write_text("1")
    try:
        yield
    finally:
        if before != "1":
            _TIOCSTI_KNOB.write_text(before)


@pytest.fixture(scope="module")
def box(tiocsti_on) -> Iterator[Box]:
    yield from security_box()


@pytest.fixture(scope="module")
def alicepod(box: Box) -> str:
    """alice's pod, whose PATH puts her ~/bin (with her ``ps``) first."""
    h = home(ALICE)
    bin_ = h / "bin"
    bin_.mkdir(exist_ok=True)
    pw = pwd.getpwnam(ALICE)
    os.chown(bin_, pw.pw_uid, pw.pw_gid)
    write_as(ALICE, bin_ / "ps", _PS, 0o755)
    r = box.cli(ALICE, "launch", "--name", "alicepod", "-e", f"PATH={bin_}:/usr/local/bin:/usr/bin:/bin",
                "--", "sleep", "3600")
    assert r.returncode == 0, r.stderr
    box.running("alicepod", ALICE)
    return "alicepod"


def _read_until(fd: int, want: bytes, deadline: float, out: bytes = b"") -> bytes:
    """What ``fd`` gives until ``want`` is in it (a terminal's bytes come in chunks of any size)."""
    while want not in out:
        left = deadline - time.monotonic()
        assert left > 0, f"no {want!r} in {out!r}"
        if select.select([fd], [], [], left)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: every holder of the other side closed it
                break
            if not chunk:
                break
            out += chunk
    return out


def _attack(box: Box, pod: str, marker: Path, *exec_opts: str) -> tuple[dict, int, tuple[str, int]]:
    """Root's interactive shell on a pty runs ``hwagent exec [opts] POD -- ps`` (with one more
    descriptor of its terminal, 9, as a shell's redirection leaves one); then two more lines.
    Answers alice's ps report, the root shell's pid (its session) and the terminal (path, device)."""
    h = home(ALICE)
    report = h / "ps-report.json"
    report.unlink(missing_ok=True)
    write_as(ALICE, h / "line", f"id > {marker}\n")
    master, slave = os.openpty()
    tty = (os.ttyname(slave), os.fstat(slave).st_rdev)  # the node goes when the pty is closed
    # setsid -c: sh leads a session whose controlling terminal is the pty, as a login shell's is
    shell = subprocess.Popen(["setsid", "-c", "sh"], stdin=slave, stdout=slave, stderr=slave,
                             env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/root"})
    try:
        deadline = time.monotonic() + BUDGET_S
        opts = " ".join(exec_opts)
        os.write(master, f"{HWAGENT} exec --root-dir {box.root} {opts} {pod} -- ps 9<&0; "
                 "echo EXEC-$((1+1))-DONE\n".encode())
        out = _read_until(master, b"EXEC-2-DONE", deadline)
        # whatever was pushed into root's terminal is read by the shell before this line
        os.write(master, b"echo SHELL-$((6*7))\n")
        out = _read_until(master, b"SHELL-42", deadline, out)
        os.write(master, b"exit\n")
        assert shell.wait(BUDGET_S) == 0, out
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
        os.close(master)
        os.close(slave)
    assert report.exists(), f"alice's ps did not run: {out!r}"
    return json.loads(report.read_text()), shell.pid, tty


def _assert_no_terminal_of_callers(rep: dict, shell_sid: int, tty: tuple[str, int]) -> None:
    tty_path, tty_rdev = tty
    assert rep["sid"] != shell_sid, f"the command is in the caller's session: {rep}"
    assert rep["tty_nr"] != tty_rdev, f"the caller's terminal is the command's controlling terminal: {rep}"
    held = {fd: link for fd, link in rep["fds"].items() if link in (tty_path, "/dev/tty")}
    assert not held, f"the pod's process holds the caller's terminal on fds {held}"


def test_exec_without_tty_gives_the_pod_no_descriptor_of_roots_terminal(box, alicepod, tmp_path):
    marker = tmp_path / "injected"  # under root's 0700 pytest dir: only root can write it
    rep, shell_sid, tty = _attack(box, alicepod, marker)
    assert not marker.exists(), f"alice's line ran in root's shell: {marker.read_text()!r}"
    pushed = {k: v for k, v in rep["sti"].items() if v == "pushed"}
    assert not pushed, f"TIOCSTI from the pod reached a terminal: {rep}"
    assert rep["tty_nr"] == 0, f"the command has a controlling terminal: {rep}"
    _assert_no_terminal_of_callers(rep, shell_sid, tty)
    assert all(not link.startswith("/dev/pts/") for link in rep["fds"].values()), rep


def test_exec_with_tty_gives_the_pod_a_terminal_of_its_own_only(box, alicepod, tmp_path):
    marker = tmp_path / "injected"
    rep, shell_sid, tty = _attack(box, alicepod, marker, "-t")
    assert not marker.exists(), f"alice's line ran in root's shell: {marker.read_text()!r}"
    _assert_no_terminal_of_callers(rep, shell_sid, tty)
    # its own pty is its controlling terminal (what TIOCSTI reaches is the pod's own input)
    assert rep["tty_nr"] != 0 and rep["sti"].get("/dev/tty") == "pushed", rep


def _exec(box: Box, *argv: str, stdin: bytes | None = None, timeout: float = BUDGET_S) -> subprocess.CompletedProcess:
    return subprocess.run([str(HWAGENT), "exec", "--root-dir", str(box.root), *argv], input=stdin,
                          capture_output=True, timeout=timeout, cwd="/")


def test_exec_keeps_output_exit_status_and_streams_stdin(box, alicepod):
    r = _exec(box, alicepod, "--", "sh", "-c", "echo hi; echo err >&2; exit 7", stdin=b"")
    assert (r.returncode, r.stdout, r.stderr) == (7, b"hi\n", b"err\n"), r
    r = _exec(box, alicepod, "--", "cat", stdin=b"data\n")
    assert (r.returncode, r.stdout) == (0, b"data\n"), r
    blob = bytes(range(256)) * 8192  # 2 MiB of every byte value: more than any pipe holds
    r = _exec(box, alicepod, "--", "sh", "-c", "cat; cat /proc/self/stat >/dev/null; echo end >&2", stdin=blob)
    assert r.returncode == 0 and r.stdout == blob and r.stderr == b"end\n", (r.returncode, len(r.stdout), r.stderr)
    # stdin from a file, and a command that never reads it: its end is still reached
    r = _exec(box, alicepod, "--", "true", stdin=blob)
    assert r.returncode == 0, r
    # a command killed by a signal: exec dies of it too, as the command itself did before the
    # relay (a shell script that ran exec stops on the command's SIGINT, as it does for its own)
    r = _exec(box, alicepod, "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == -signal.SIGTERM, r
    r = _exec(box, alicepod, "--", "no-such-command-here")
    assert r.returncode == 127 and b"no-such-command-here" in r.stderr, r


def test_exec_output_into_a_closed_pipe_ends_the_command(box, alicepod):
    """``exec POD -- cat /dev/zero | head -c N``: when the reader goes away, the command gets
    SIGPIPE as it would in a shell pipeline, and exec ends."""
    p = subprocess.run(f"{HWAGENT} exec --root-dir {box.root} {alicepod} -- cat /dev/zero | head -c 5000000 | wc -c",
                       shell=True, capture_output=True, text=True, timeout=BUDGET_S)
    assert p.stdout.strip() == "5000000", p


def _interactive_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def test_exec_ctrl_c_reaches_the_commands_process_group(box, alicepod):
    """Ctrl-C on the caller's terminal (the CLI's foreground) reaches the command and its
    children: the shell's trap runs and its exit status is exec's."""
    master, slave = os.openpty()
    script = 'trap "echo got-int; exit 5" INT; echo ready; while :; do sleep 0.1; done'
    # an interactive caller's SIGINT is at its default; a test run started as a script's background
    # job (nohup ... &) has it ignored, and exec then rightly forwards nothing (_piperelay's rule)
    proc = subprocess.Popen(["setsid", "-c", str(HWAGENT), "exec", "--root-dir", str(box.root), alicepod,
                             "--", "sh", "-c", script], stdin=slave, stdout=slave, stderr=slave,
                            preexec_fn=_interactive_signals)
    try:
        deadline = time.monotonic() + BUDGET_S
        out = _read_until(master, b"ready", deadline)
        os.write(master, b"\x03")
        out = _read_until(master, b"got-int", deadline, out)
        assert proc.wait(BUDGET_S) == 5, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        os.close(slave)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for job control")
def test_exec_as_a_background_job_is_not_stopped_by_its_relay(box, alicepod):
    """``hwagent exec POD -- CMD &`` in an interactive shell: the relay does not read the terminal
    while it is a background job (SIGTTIN would stop it, and with it a command that never reads)."""
    master, slave = os.openpty()
    shell = subprocess.Popen(["setsid", "-c", "bash", "--norc", "--noprofile", "-i"], stdin=slave, stdout=slave,
                             stderr=slave, env={"PATH": "/usr/bin:/bin", "HOME": "/root", "PS1": "$ "})
    try:
        deadline = time.monotonic() + BUDGET_S
        os.write(master, f"{HWAGENT} exec --root-dir {box.root} {alicepod} -- sh -c 'sleep 1; echo bg-$((2+3))' & "
                 "wait $!; echo WAITED-$((1000 + $?))\n".encode())
        # typed while the job runs: for the foreground shell, and it makes the terminal readable
        os.write(master, b"echo TYPED-$((3+4))\n")
        out = _read_until(master, b"WAITED-1", deadline)
        out = _read_until(master, b"TYPED-7", deadline, out)
        assert b"WAITED-1000" in out and b"bg-5" in out, f"the background exec did not end well: {out!r}"
        os.write(master, b"exit\n")
        shell.wait(BUDGET_S)
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
        os.close(master)
        os.close(slave)


_LOADER_AND_INTERPRETER_VARS = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "GLIBC_TUNABLES",
                                "MALLOC_CHECK_", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONWARNINGS")

_PRELOAD_C = r'''
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void hit(void) {
    const char *log = geteuid() == 0 ? "%(root)s" : "%(user)s";
    char buf[64];
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) return;
    int n = snprintf(buf, sizeof buf, "%%d\n", (int)getpid());
    if (write(fd, buf, n) < 0) {}
    close(fd);
}
'''


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{t}/children").read_text().split()]
        except OSError:
            pass
    return out


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler for the LD_PRELOAD object")
def test_the_containers_environment_reaches_only_the_command_as_the_pods_user(box, tmp_path):
    """The container's environment (read as root from /proc/<pid>/environ) is data: no root
    process of ``hwagent exec`` starts or runs with it; the command gets it (its LD_PRELOAD
    object loads as alice, its PYTHONPATH is read as alice)."""
    h = home(ALICE)
    rootlog = tmp_path / "root-loaded"  # under root's 0700 pytest dir: alice cannot write it
    userlog = h / "user-loaded"
    so = h / "e.so"
    src = tmp_path / "e.c"
    src.write_text(_PRELOAD_C % {"root": rootlog, "user": userlog})
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True, timeout=60)
    pw = pwd.getpwnam(ALICE)
    os.chown(so, pw.pw_uid, pw.pw_gid)
    py = h / "py"
    py.mkdir(exist_ok=True)
    os.chown(py, pw.pw_uid, pw.pw_gid)
    write_as(ALICE, py / "sitecustomize.py",
             f"import os\nif os.geteuid() == 0:\n    open({str(rootlog)!r}, 'a').write('python\\n')\n")
    values = {"LD_PRELOAD": str(so), "LD_LIBRARY_PATH": str(py), "LD_AUDIT": "", "GCONV_PATH": str(py),
              "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=131072", "MALLOC_CHECK_": "0",
              "PYTHONPATH": str(py), "PYTHONSTARTUP": str(py / "sitecustomize.py"), "PYTHONWARNINGS": "ignore"}
    env_args = [a for k in _LOADER_AND_INTERPRETER_VARS for a in ("-e", f"{k}={values[k]}")]
    r = box.cli(ALICE, "launch", "--name", "envpod", *env_args, "--", "sleep", "3600")
    assert r.returncode == 0, r.stderr
    pod = box.running("envpod", ALICE)
    environ = Path(f"/proc/{pod['containers'][0]['pid']}/environ").read_bytes()
    assert f"LD_PRELOAD={so}".encode() in environ.split(b"\0"), "the container runs with alice's variables"
    rootlog.unlink(missing_ok=True)  # what launch's own processes did is item 1's, not exec's
    userlog.unlink(missing_ok=True)
    script = 'echo "$LD_PRELOAD"; python3 -c "import os; print(os.geteuid())"; echo up >&2; sleep 30'
    proc = subprocess.Popen([str(HWAGENT), "exec", "--root-dir", str(box.root), "envpod", "--", "sh", "-c", script],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/")
    try:
        assert proc.stderr is not None and proc.stderr.readline() == b"up\n"
        for pid in _tree(proc.pid):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            euid = int(next(x for x in status.splitlines() if x.startswith("Uid:")).split()[2])
            if euid == 0:
                leaked = [e for e in env if e.split(b"=", 1)[0].decode() in _LOADER_AND_INTERPRETER_VARS]
                assert not leaked, f"root process {pid} of exec runs with the container's {leaked}"
    finally:
        proc.kill()
        out, _ = proc.communicate(timeout=BUDGET_S)
    assert out.decode().splitlines()[:2] == [str(so), str(pw.pw_uid)], out
    assert not rootlog.exists(), f"a root process loaded the container's LD_PRELOAD/PYTHONPATH: {rootlog.read_text()}"
    assert userlog.exists(), "the command itself got the container's LD_PRELOAD (applied in its execve)"
    assert box.cli(None, "rm", "envpod").returncode == 0
