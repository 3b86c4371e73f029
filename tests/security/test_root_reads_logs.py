"""Root's ``hwagent logs`` of a member's pod follows none of the member's links and waits on none
of the member's FIFOs (issue 32, found in review).

The log directory is the pod's user's own: alice may put anything there. Root reading it
with ``--previous-files`` opened every ``<container>.log.N`` with a plain ``open``: a symbolic
link onto a root-only file printed that file, a FIFO hung root's command (and a link onto a
device node would have opened the device as root: a watchdog, a tape). Every file the command
reads in there is opened without following a link and without waiting, and must be a regular
file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.security.support import ALICE, Box, as_user, security_box
from tests.users_support import HWAGENT

pytestmark = [pytest.mark.timeout(300), pytest.mark.root]

#: a refusal comes at once; a hang is what the test looks for
WAIT_S = 15


@pytest.fixture(scope="module")
def box():
    # a group of this module's own: another module may make and remove the shared one beside it
    yield from security_box(group=f"hwsg{ALICE[4:]}")


def _root_logs(box: Box, *args: str) -> subprocess.CompletedProcess | None:
    """Root's ``hwagent logs ARGS``; None when it did not end in WAIT_S (it waited on a FIFO)."""
    try:
        return subprocess.run([str(HWAGENT), "logs", "--root-dir", str(box.root), *args],
                              capture_output=True, text=True, timeout=WAIT_S, cwd="/")
    except subprocess.TimeoutExpired:
        return None


@pytest.fixture()
def planted(box: Box, tmp_path: Path) -> tuple[Path, Path]:
    """An ended pod of alice's, a root-only secret, and alice's log directory."""
    r = box.cli(ALICE, "launch", "--name", "planted", "--wait", "--", "sh", "-c", "echo alices-own-line")
    assert r.returncode == 0, r.stderr
    os.chmod(tmp_path, 0o700)
    secret = tmp_path / "root-only"
    secret.write_text("ROOT-ONLY-SECRET\n")
    os.chmod(secret, 0o600)
    yield box.root / "logs" / "default_planted", secret
    box.cli(ALICE, "rm", "planted")


@pytest.mark.parametrize("flags", [(), ("--tail", "5"), ("--timestamps",)])
def test_a_link_in_place_of_a_rotated_log_is_not_followed(box: Box, planted: tuple[Path, Path], flags) -> None:
    d, secret = planted
    r = as_user(ALICE, "ln", "-s", str(secret), str(d / "main.log.1"))
    assert r.returncode == 0, r.stderr
    r = _root_logs(box, "--previous-files", *flags, "planted")
    assert r is not None, "root's logs hung"
    assert "ROOT-ONLY-SECRET" not in r.stdout, r.stdout
    assert r.returncode != 0 and "main.log.1" in r.stderr, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["main.log.1", "main.times.1", "main.times"])
@pytest.mark.parametrize("flags", [(), ("--tail", "5"), ("--timestamps",)])
def test_a_fifo_in_the_log_dir_hangs_no_root_reader(box: Box, planted: tuple[Path, Path], name: str, flags) -> None:
    d, _ = planted
    target = d / name
    # a FIFO in place of a rotated log, of its times file (beside a regular rotated log), of the current times
    r = as_user(ALICE, "sh", "-c", f"rm -f {target} && mkfifo {target} && (test -e {d}/main.log.1 || echo old > "
                f"{d}/main.log.1)")
    assert r.returncode == 0, r.stderr
    r = _root_logs(box, "--previous-files", *flags, "planted")
    assert r is not None, f"root's logs {' '.join(flags)} hung on alice's FIFO {name}"
    if r.returncode != 0:
        assert name in r.stderr, r.stderr
