"""The shim as alice attacks it (issue 32 items 1 and 3, and the shim's part of the security tier).

The shim (agent/runtime/shim.c, or the Python fallback agent/runtime/shim.py) runs as root
on a group member's behalf. Nothing the member hands it may run as root: the job's
environment (``--env``) is data the shim applies in the workload's final ``execve``, after
the drop to the member's user, never the environment a root process starts with (the
dynamic loader honours ``LD_PRELOAD``, ``GCONV_PATH``, ``GLIBC_TUNABLES``, … for root, and
Python ``PYTHON*``). A job starts with the descriptors it is given (0, 1, 2), not with the
daemon's eBPF programs and maps. And the shim itself is out of the member's reach: its
environ, descriptors and memory unreadable, no ptrace, no signal. The job holds what the
member's own shell holds, no more: the same credentials and capability sets, and a
setuid-root binary behaves in it as in that shell (Slurm's position; no ``no_new_privs``).

Every test runs against both shims (a daemon per shim, pressure probes on, so the daemon
holds BPF descriptors a leak would hand on)."""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.support import ALICE, Box, as_user, home, security_box, until, write_as

#: the interpreter alice can run (``python3`` on root's PATH may be a pyenv shim under /root)
PY = "/usr/bin/python3"
#: the credential lines of /proc/<pid>/status that say what a process may do
CRED_LINES = r"^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):"


@pytest.fixture(scope="module", params=["c", "python"])
def box(request) -> Iterator[Box]:
    """A daemon whose pressure probes are loaded (its BPF descriptors are what a leak would hand
    on), with the C shim or with the Python fallback."""
    config = {"pressure": {"enabled": "true"}}
    if request.param == "python":
        config["runtime"] = {"shim": '"python"'}
    for b in security_box(config=config):
        until(lambda pid=b.daemon.proc.pid: bpf_fds(pid), "the daemon's pressure probes to load", b.daemon)
        yield b


def bpf_fds(pid: int) -> list[str]:
    """The eBPF programs and maps among ``pid``'s descriptors."""
    return [t for t in fd_targets(pid).values() if "bpf" in t]


def fd_targets(pid: int) -> dict[int, str]:
    """Descriptor -> what it points at, for ``pid`` (read as root)."""
    out = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            pass  # closed meanwhile
    return out


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(e.split("=", 1) for e in raw.decode(errors="replace").split("\0") if "=" in e)


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def launch(box: Box, name: str, *args: str) -> subprocess.CompletedProcess:
    r = box.cli(ALICE, "launch", "--name", name, *args)
    assert r.returncode == 0, r.stderr
    return r


def running_job(box: Box, name: str, *args: str) -> tuple[int, int]:
    """Launch a long job as alice: (its shim's pid, the workload's pid)."""
    launch(box, name, *args)
    pid = box.running(name, ALICE)["containers"][0]["pid"]
    shim = parent(pid)
    assert Path(f"/proc/{shim}/cmdline").read_bytes().split(b"\0")[0].endswith((b"hwagent-shim", b"python3",
                                                                                 b"python")), shim
    return shim, pid


def remove(box: Box, name: str) -> None:
    assert box.cli(ALICE, "rm", name).returncode == 0


def waited(box: Box, name: str, *args: str) -> subprocess.CompletedProcess:
    """``launch --wait --rm`` as alice: the job's output and exit status."""
    return box.cli(ALICE, "launch", "--name", name, "--wait", "--rm", *args)


# -- item 1: the job's environment never reaches a root process -----------------------

#: variables a process's loader, libc or interpreter acts on when it starts (each with a value
#: that does not stop the workload itself from running)
LOADER_VARIABLES = {
    "LD_PRELOAD": "/nonexistent/e.so",
    "LD_LIBRARY_PATH": "/nonexistent",
    "LD_AUDIT": "/nonexistent/audit.so",
    "LD_DEBUG": "libs",
    "LD_PROFILE": "libc.so.6",
    "LD_BIND_NOW": "1",
    "GCONV_PATH": "/nonexistent",
    "GLIBC_TUNABLES": "glibc.malloc.check=3",
    "MALLOC_CHECK_": "3",
    "MALLOC_TRACE": "/tmp/hwagent-mtrace",
    "MALLOC_PERTURB_": "165",
    "LOCPATH": "/nonexistent",
    "NLSPATH": "/nonexistent/%N",
    "HOSTALIASES": "/nonexistent",
    "PYTHONPATH": "/nonexistent",
    "PYTHONHOME": "/nonexistent",
    "PYTHONSTARTUP": "/nonexistent/startup.py",
    "PYTHONINSPECT": "1",
    "PYTHONWARNINGS": "error",
    "PYTHONMALLOC": "debug",
}


@pytest.mark.parametrize("var", sorted(LOADER_VARIABLES))
def test_the_jobs_environment_is_not_the_root_shims(box, var):
    """The shim's own environment holds nothing of the job's; the workload still gets it all."""
    value, token = LOADER_VARIABLES[var], uuid.uuid4().hex
    shim, pid = running_job(box, f"env-{var.lower().replace('_', '-').strip('-')}",
                            "--env", f"{var}={value}", "--env", f"HWSEC_TOKEN={token}", "--", "sleep", "600")
    try:
        own = environ(shim)
        assert var not in own and "HWSEC_TOKEN" not in own, own
        assert token not in Path(f"/proc/{shim}/environ").read_text(errors="replace")
        job = environ(pid)
        assert job.get(var) == value and job.get("HWSEC_TOKEN") == token, job
    finally:
        remove(box, f"env-{var.lower().replace('_', '-').strip('-')}")


@pytest.fixture(scope="module")
def planted(box) -> Path:
    """alice's traps in her home: ``e.so``, whose constructor leaves ``root-<pid>`` or
    ``user-<pid>`` in ``marks/`` by the euid it runs with, and ``shadow/struct.py``, a module
    of the standard library's name that does the same when Python imports it."""
    h = home(ALICE)
    marks = h / "marks"
    marks.mkdir(exist_ok=True)
    os.chown(marks, *_ids(ALICE))
    src = write_as(ALICE, h / "e.c", textwrap.dedent(f"""\
        #include <fcntl.h>
        #include <stdio.h>
        #include <unistd.h>
        __attribute__((constructor)) static void mark(void) {{
            char p[512];
            snprintf(p, sizeof p, "{marks}/%s-%d", geteuid() == 0 ? "root" : "user", (int)getpid());
            int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0) close(fd);
        }}
        """))
    r = as_user(ALICE, "gcc", "-shared", "-fPIC", "-o", str(h / "e.so"), str(src))
    assert r.returncode == 0, r.stderr
    shadow = h / "shadow"
    shadow.mkdir(exist_ok=True)
    os.chown(shadow, *_ids(ALICE))
    write_as(ALICE, shadow / "struct.py", textwrap.dedent(f"""\
        import os, sys
        open("{marks}/%s-%d" % ("root" if os.geteuid() == 0 else "user", os.getpid()), "w").close()
        sys.path.remove("{shadow}")
        del sys.modules["struct"]
        import struct as _real
        globals().update(_real.__dict__)
        """))
    return h


def _ids(user: str) -> tuple[int, int]:
    import pwd

    pw = pwd.getpwnam(user)
    return pw.pw_uid, pw.pw_gid


def marks(h: Path) -> list[str]:
    return sorted(p.name.split("-")[0] for p in (h / "marks").iterdir())


def clear_marks(h: Path) -> None:
    for p in (h / "marks").iterdir():
        p.unlink()


def test_ld_preload_runs_no_code_as_root(box, planted):
    """The issue's attack: an ``LD_PRELOAD`` library whose constructor acts when euid is 0."""
    clear_marks(planted)
    so = str(planted / "e.so")
    r = waited(box, "preload", "--env", f"LD_PRELOAD={so}", "--", "env")
    assert r.returncode == 0, r.stderr
    assert f"LD_PRELOAD={so}" in r.stdout.splitlines()  # the job still has its environment
    assert "root" not in marks(planted), marks(planted)
    assert "user" in marks(planted)  # the library did load, in the workload, as alice


def test_pythonpath_runs_no_code_in_a_root_interpreter(box, planted):
    """A module named like the standard library's on ``PYTHONPATH``: the Python fallback shim
    (root) must not import it; a Python workload does."""
    clear_marks(planted)
    shadow = str(planted / "shadow")
    r = waited(box, "pypath", "--env", f"PYTHONPATH={shadow}", "--", PY, "-c",
               "import struct, os; print(os.environ['PYTHONPATH'])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == shadow
    assert marks(planted) == ["user"]


# -- item 3: a job starts with 0, 1 and 2 only -------------------------------------------

def test_a_job_starts_with_only_its_standard_descriptors(box):
    """The issue's listing: ``ls -l /proc/self/fd`` in a job showed the daemon's BPF programs and
    maps, its /dev/null and a pipe. Now 0, 1, 2 and the listing's own directory."""
    assert bpf_fds(box.daemon.proc.pid)  # the daemon does hold some: a leak would show them
    listing = ("import os\n"
               "own = f'/proc/{os.getpid()}/fd'\n"
               "fds = []\n"
               "for n in os.listdir('/proc/self/fd'):\n"
               "    try:\n"
               "        if os.readlink(f'/proc/self/fd/{n}') != own:\n"
               "            fds.append(int(n))\n"
               "    except OSError:\n"
               "        pass  # the listing's own, closed by now\n"
               "print(sorted(fds))\n")
    r = waited(box, "fds", "--", PY, "-c", listing)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0, 1, 2]", r.stdout
    r = waited(box, "fdls", "--", "ls", "-l", "/proc/self/fd")
    assert "bpf" not in r.stdout and len(re.findall(r" \d+ -> ", r.stdout)) == 4, r.stdout


def test_the_shim_holds_none_of_the_daemons_descriptors(box):
    shim, pid = running_job(box, "shimfds", "--", "sleep", "600")
    try:
        held = fd_targets(shim)
        assert not [t for t in held.values() if "bpf" in t], held
        daemon = fd_targets(box.daemon.proc.pid)
        assert not set(held.values()) & {t for t in daemon.values() if "pipe:" in t or "socket:" in t}, held
        assert sorted(fd_targets(pid)) == [0, 1, 2], fd_targets(pid)
    finally:
        remove(box, "shimfds")


def test_the_daemons_bpf_descriptors_are_close_on_exec(box):
    """The daemon's own side: its probes' programs and maps (passed to it over a socket by its
    BPF build child) are close-on-exec, so no process it starts inherits them at all."""
    pid = box.daemon.proc.pid
    leaked = []
    for fd, target in fd_targets(pid).items():
        if "bpf" not in target:
            continue
        flags = next(line for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines()
                     if line.startswith("flags:"))
        if not int(flags.split()[1], 8) & os.O_CLOEXEC:
            leaked.append((fd, target))
    assert not leaked, leaked


# -- the shim itself, out of alice's reach ---------------------------------------------

@pytest.fixture(scope="module")
def shim_of_a_job(box) -> Iterator[tuple[int, int]]:
    """A running job of alice's (``HWSEC_SECRET`` in its environment): its shim's pid and its own."""
    ids = running_job(box, "target", "--env", "HWSEC_SECRET=s3cr3t", "--", "sleep", "600")
    yield ids
    remove(box, "target")


@pytest.mark.parametrize("what", ["environ", "fd", "mem", "maps"])
def test_alice_cannot_read_the_shims_proc_files(box, shim_of_a_job, what):
    shim, _ = shim_of_a_job
    argv = ["ls", f"/proc/{shim}/fd"] if what == "fd" else ["cat", f"/proc/{shim}/{what}"]
    r = as_user(ALICE, *argv)
    assert r.returncode != 0 and "Permission denied" in r.stderr, (r.stdout, r.stderr)
    assert "s3cr3t" not in Path(f"/proc/{shim}/environ").read_text(errors="replace")


def test_alice_cannot_ptrace_the_shim(box, shim_of_a_job):
    shim, _ = shim_of_a_job
    code = textwrap.dedent(f"""\
        import ctypes, sys
        libc = ctypes.CDLL(None, use_errno=True)
        for req in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
            rc = libc.ptrace(req, {shim}, None, None)
            print(rc, ctypes.get_errno())
        """)
    r = as_user(ALICE, PY, "-c", code)
    assert r.stdout.split() == ["-1", "1", "-1", "1"], (r.stdout, r.stderr)  # EPERM both
    assert "\nTracerPid:\t0\n" in Path(f"/proc/{shim}/status").read_text()


@pytest.mark.parametrize("sig", ["KILL", "TERM", "STOP", "HUP"])
def test_alice_cannot_signal_the_shim(box, shim_of_a_job, sig):
    shim, pid = shim_of_a_job
    r = as_user(ALICE, "kill", f"-{sig}", str(shim))
    assert r.returncode != 0 and "Operation not permitted" in r.stderr, r.stderr
    state = Path(f"/proc/{shim}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state in ("S", "R"), state
    assert box.pod("target", ALICE)["phase"] == "Running"


def test_the_job_holds_what_alices_own_shell_holds(box):
    """Uids, gids, groups, every capability set, no_new_privs and seccomp: as under ``runuser``."""
    r = waited(box, "creds", "--", "grep", "-E", CRED_LINES, "/proc/self/status")
    assert r.returncode == 0, r.stderr
    shell = as_user(ALICE, "grep", "-E", CRED_LINES, "/proc/self/status")
    assert r.stdout == shell.stdout
    caps = dict(line.split(":\t") for line in r.stdout.splitlines())
    assert all(int(caps[k], 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapAmb")), caps


def test_a_setuid_binary_behaves_in_the_job_as_in_alices_shell(box):
    """A setuid-root program (root installed it) runs in the job exactly as alice would run it
    from her shell: the job neither gains more through it nor is barred from it (Slurm's
    position: no no_new_privs on jobs, see docs/runtime.md)."""
    d = box.root.parent / f"suid-{uuid.uuid4().hex[:6]}"
    d.mkdir(mode=0o755)
    try:
        src = d / "who.c"
        src.write_text(textwrap.dedent("""\
            #include <stdio.h>
            #include <string.h>
            #include <unistd.h>
            int main(void) {
                char line[256];
                FILE *f = fopen("/proc/self/status", "r");
                printf("ruid=%d euid=%d\\n", (int)getuid(), (int)geteuid());
                while (f && fgets(line, sizeof line, f))
                    if (!strncmp(line, "Cap", 3) || !strncmp(line, "NoNewPrivs", 10)) fputs(line, stdout);
                return 0;
            }
            """))
        exe = d / "who"
        subprocess.run(["gcc", "-o", str(exe), str(src)], check=True, capture_output=True, timeout=60)
        os.chmod(exe, 0o4755)
        r = waited(box, "suid", "--", str(exe))
        shell = as_user(ALICE, str(exe))
        assert r.returncode == 0 and shell.returncode == 0, (r.stderr, shell.stderr)
        assert r.stdout == shell.stdout, (r.stdout, shell.stdout)
        assert "NoNewPrivs:\t0" in r.stdout
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()
