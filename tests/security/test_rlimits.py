"""Issue 32 (review): a job gets its submitter's resource limits, never the daemon's.

The daemon runs as root with its descriptor limit raised to the hard one at start
(agent/daemon/fdlimit.py), and with whatever else its own start gave it. A job that
inherited those would hand a member limits an administrator did not give her
(limits.conf). Slurm's model is the reference (PropagateResourceLimits=ALL): the job
gets exactly the limits the submitting process had. Here the daemon runs with nofile
20000:20000; alice (and root) submit under ``prlimit`` with smaller limits, and the job
reads its own /proc/self/limits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.support import ALICE, Box, home, security_box, until

#: the daemon's own descriptor limit, raised and far above what the submitters have
DAEMON_NOFILE = 20000
#: what alice's shell has (as an administrator's limits.conf would set it)
ALICE_LIMITS = {"Max open files": (512, 1024), "Max processes": (300, 400), "Max core file size": (0, 0)}
ALICE_PRLIMIT = ("--nofile=512:1024", "--nproc=300:400", "--core=0:0")


@pytest.fixture(scope="module", params=["c", "python"])
def box(request):
    """A daemon with a raised descriptor limit, once with the C shim and once with its Python
    fallback: both must give a job the same limits."""
    runtime = {"backoff_initial_s": "0.2", **({"shim": '"python"'} if request.param == "python" else {})}
    yield from security_box(config={"runtime": runtime}, nofile=DAEMON_NOFILE)


def limits(text: str) -> dict[str, tuple[int | None, int | None]]:
    """/proc/<pid>/limits as {label: (soft, hard)}, None for unlimited."""
    out = {}
    for line in text.splitlines()[1:]:
        words = line[26:].split()
        if len(words) < 2 or not line.startswith("Max "):
            continue
        out[line[:26].strip()] = tuple(None if w == "unlimited" else int(w) for w in words[:2])
    return out


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _grantable(want: dict[str, tuple[int | None, int | None]], daemon: int) -> dict[str, tuple[int | None, int | None]]:
    """``want`` as a shim the daemon started can grant it: all of it with CAP_SYS_RESOURCE; without
    (a confined root, as in some containers) no hard limit above the daemon's own, and the shim
    clips to that (never above ``want``)."""
    status = Path(f"/proc/{daemon}/status").read_text()
    cap_eff = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), 16)
    if cap_eff & (1 << 24):  # CAP_SYS_RESOURCE
        return want
    own = limits(Path(f"/proc/{daemon}/limits").read_text())
    out = {}
    for label, (soft, hard) in want.items():
        hard = _least(hard, own[label][1])
        out[label] = (_least(soft, hard), hard)
    return out


def _launch_under(box: Box, user: str | None, prlimit: tuple[str, ...], *args: str) -> subprocess.CompletedProcess:
    """``hwagent launch`` run by ``user`` (None: root) under ``prlimit``, as a shell with those limits would."""
    argv = ["prlimit", *prlimit, "--", str(Path(sys.executable).parent / "hwagent"), "launch",
            "--root-dir", str(box.root), *args]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=str(home(user)) if user else "/")


def test_alice_job_gets_exactly_her_limits(box):
    r = _launch_under(box, ALICE, ALICE_PRLIMIT, "--wait", "--rm", "--", "cat", "/proc/self/limits")
    assert r.returncode == 0, r.stderr
    got = limits(r.stdout)
    for label, want in ALICE_LIMITS.items():
        assert got[label] == want, f"{label}: the job has {got[label]}, alice's shell {want}\n{r.stdout}"


def test_daemon_raised_nofile_does_not_reach_alice(box):
    """The daemon holds 20000 descriptors' worth; alice's shell has 1024: her job has 1024, not 20000."""
    assert limits(Path(f"/proc/{box.daemon.proc.pid}/limits").read_text())["Max open files"][0] >= DAEMON_NOFILE
    r = _launch_under(box, ALICE, ("--nofile=1024:4096",), "--wait", "--rm", "--", "cat", "/proc/self/limits")
    assert r.returncode == 0, r.stderr
    assert limits(r.stdout)["Max open files"] == (1024, 4096), r.stdout


def test_root_job_gets_roots_own_limits(box):
    """Root is trusted, but its job still gets what root's shell had, not the daemon's raised limit."""
    r = _launch_under(box, None, ("--nofile=2048:8192", "--core=0:0"), "--wait", "--rm", "--",
                      "cat", "/proc/self/limits")
    assert r.returncode == 0, r.stderr
    got = limits(r.stdout)
    assert got["Max open files"] == (2048, 8192), r.stdout
    assert got["Max core file size"] == (0, 0), r.stdout


def test_root_static_manifest_gets_pid1_limits(box):
    """A pod with no submitting process (root's manifests dir) gets the system's defaults, PID 1's."""
    out = box.root.parent / "static-out"
    out.mkdir(exist_ok=True)
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rlstatic"},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "command": ["sh", "-c", f"cat /proc/self/limits > {out}/limits.tmp && "
                                                            f"mv {out}/limits.tmp {out}/limits"]}]}}
    mdir = box.root / "manifests"
    mdir.mkdir(exist_ok=True)
    (mdir / "rlstatic.json").write_text(json.dumps(manifest))
    try:
        text = until(lambda: (out / "limits").exists() and (out / "limits").read_text(),
                     "the static pod to write its limits", box.daemon)
        want = _grantable(limits(Path("/proc/1/limits").read_text()), box.daemon.proc.pid)
        got = limits(text)
        assert got["Max open files"] == want["Max open files"], text
        assert got == want, text
    finally:
        (mdir / "rlstatic.json").unlink()


def test_limits_survive_a_container_restart(box):
    """The limits are in the pod's record: the restarted container gets them again."""
    runs = home(ALICE) / "rl-runs"
    runs.unlink(missing_ok=True)
    script = f"grep -E 'open files|processes' /proc/self/limits >> {runs}; exit 1"
    r = _launch_under(box, ALICE, ALICE_PRLIMIT, "--name", "rlrestart", "--restart", "always", "-d", "--",
                      "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    try:
        text = until(lambda: runs.exists() and runs.read_text().count("open files") >= 3 and runs.read_text(),
                     "three runs of the container", box.daemon)
        nofile = [limits("head\n" + line)["Max open files"] for line in text.splitlines() if "open files" in line]
        nproc = [limits("head\n" + line)["Max processes"] for line in text.splitlines() if "processes" in line]
        assert set(nofile) == {(512, 1024)}, text
        assert set(nproc) == {(300, 400)}, text
    finally:
        box.cli(ALICE, "rm", "-f", "rlrestart")
