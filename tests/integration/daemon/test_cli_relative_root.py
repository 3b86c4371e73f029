"""Every subcommand that dials the daemon, given a relative ``--root-dir``.

A relative root is relative to where the operator stands. gRPC's ``unix://``
target needs an absolute path (``unix://root/status.sock`` names the authority
"root"), so a command that dialled the path as given failed with a bare
``UNKNOWN`` instead of asking the daemon, or instead of saying that none runs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.daemon.test_lifecycle import REPO, START_TIMEOUT_S, Daemon

#: what the admission commands and the status socket need; no cgroups, no probes
COMPONENTS = (
    "agent.devicemanager.component:factory",
    "agent.cpu.component:create",
    "agent.workloads.component:factory",
    "agent.status.component:factory",
)
CONFIG = """
[cpu]
enforce_cgroups = false
[devices]
enabled = false
[pressure]
enabled = false
[runtime]
enabled = false
"""
MANIFEST = "metadata: {name: rel}\nspec: {containers: [{name: c, command: [sleep, '100']}]}\n"


@pytest.fixture
def base() -> Iterator[Path]:
    """A short directory (unix socket paths are limited to 107 bytes) that is the CLI's cwd."""
    d = Path(tempfile.mkdtemp(prefix="hwrel-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def hwagent(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI as an operator runs it, standing in ``cwd``."""
    return subprocess.run([sys.executable, "-m", "agent.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def wait_for(cond, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not cond():
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_every_dialling_command_takes_a_relative_root_dir(base):
    cfg = base / "hwagent.toml"
    cfg.write_text(CONFIG)
    (base / "pod.yaml").write_text(MANIFEST)
    d = Daemon(base, "--config", str(cfg), components=COMPONENTS)
    try:
        wait_for(lambda: (d.root / "admission.sock").is_socket() and (d.root / "status.sock").is_socket(),
                 "the admission and status sockets", d.proc)
        rel = ("--root-dir", "root")  # d.root is base/root: relative to the CLI's cwd
        cases = [
            ("status", "--format", "json"),
            ("cpus", "--format", "json"),
            ("admit", "--dry-run", "pod.yaml"),
            ("admit", "pod.yaml"),
            ("ps", "--format", "json"),
            ("describe", "rel"),
            ("rm", "rel"),
            ("launch", "--name", "rel2", "--", "sleep", "100"),
        ]
        for argv in cases:
            r = hwagent(base, argv[0], *rel, *argv[1:])  # before launch's "--"
            assert r.returncode == 0, (argv, r.stderr)
            assert "UNKNOWN" not in r.stderr, (argv, r.stderr)
        # no runtime in this daemon: the refusal is the daemon's own answer, so the call got through
        r = hwagent(base, "stop", "rel2", "--grace", "1", *rel)
        assert r.returncode == 1 and "no workload runtime" in r.stderr, r.stderr
        # the live view, not the checkpoint: only the daemon's answer has a "source" of the running policy
        r = hwagent(base, "cpus", "--format", "json", *rel)
        assert '"source": "checkpoint' not in r.stdout, r.stdout
        r = hwagent(base, "ps", *rel)
        assert "rel2" in r.stdout, r.stdout
        # the CPU plugin's own socket, named relative to the cwd
        r = hwagent(base, "cpus", "--socket", "root/cpu/qrm_cpu_plugin_dynamic.sock", "--format", "json")
        assert r.returncode == 0 and "UNKNOWN" not in r.stderr, r.stderr
        assert d.stop() == 0
    finally:
        d.cleanup()


def test_no_daemon_under_a_relative_root_says_so(base):
    (base / "root").mkdir()
    # a socket file with nobody behind it: what a daemon killed with -9 leaves
    import socket

    for name in ("status.sock", "admission.sock"):
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(base / "root" / name))
        s.close()
    rel = ("--root-dir", "root")
    for argv in (("status",), ("ps",), ("describe", "x"), ("admit", "--dry-run", "/dev/null")):
        r = hwagent(base, *argv, *rel)
        assert r.returncode != 0, (argv, r.stdout, r.stderr)
        assert "UNKNOWN" not in r.stderr, (argv, r.stderr)
        assert str(base / "root") in r.stderr, (argv, r.stderr)  # the path resolved, as the operator meant it
    r = hwagent(base, "status", *rel)
    assert "hwagent is not running" in r.stderr, r.stderr
    # cpus falls back to the checkpoint when no daemon answers, and says there is none
    r = hwagent(base, "cpus", *rel)
    assert r.returncode != 0 and "UNKNOWN" not in r.stderr and "no cpu checkpoint" in r.stderr, r.stderr
    r = hwagent(base, "cpus", "--socket", "root/status.sock")
    assert r.returncode != 0 and "UNKNOWN" not in r.stderr and str(base / "root") in r.stderr, r.stderr
