"""Item 9 of issue 32: a user who may not read the daemon's status is told so, never that the daemon
is not running.

``status``, ``cpus``, ``resources`` and ``memory`` read ``<root>/status.sock``, which stays root's
(0600): its answers name every user's pods, CPUs, devices and memory, and only root sees who runs
what (item 7). A member of the socket group is told that, what to run instead (as root, or
``hwagent ps`` for its own pods); a user in no group is told the group to ask for, as ``ps`` tells it.
Neither learns a pod's name from the answer.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.security.support import ALICE, MALLORY, Box, security_box

pytestmark = pytest.mark.timeout(600)

#: a socket group of this module's own (other modules' boxes make and remove the shared one)
GROUP = "hwv" + ALICE[-8:]
COMMANDS = ("status", "cpus", "resources", "memory")
#: root's pod: its name must reach no one but root
SECRET = "rootsecret"


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    for b in security_box(group=GROUP):
        r = b.cli(None, "launch", "--name", SECRET, "--", "sleep", "600")
        assert r.returncode == 0, r.stderr
        b.running(SECRET)
        yield b


def test_root_reads_the_status_and_sees_every_pod(box):
    """The control: the daemon runs and root's status names root's pod."""
    r = box.cli(None, "status")
    assert r.returncode == 0 and SECRET in r.stdout, r.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_a_member_is_told_it_may_not_not_that_the_daemon_is_down(box, command):
    r = box.cli(ALICE, command)
    out = r.stdout + r.stderr
    assert r.returncode != 0, r.stdout
    assert "not running" not in out and "no running daemon" not in out, out
    assert f"hwagent {command}: error: permission denied: you are not allowed to" in r.stderr, r.stderr
    assert f"{box.root / 'status.sock'} is root:root 0600" in r.stderr, r.stderr
    assert f"sudo hwagent {command}" in r.stderr and "`hwagent ps`" in r.stderr, r.stderr
    assert SECRET not in out


@pytest.mark.parametrize("command", COMMANDS)
def test_a_user_outside_the_group_is_told_the_group_to_ask_for(box, command):
    r = box.cli(MALLORY, command)
    out = r.stdout + r.stderr
    assert r.returncode != 0, r.stdout
    assert "not running" not in out and "no running daemon" not in out, out
    assert f"hwagent {command}: error: permission denied: you are not allowed to" in r.stderr, r.stderr
    assert f"ask an admin to add you to group {GROUP}" in r.stderr, r.stderr
    assert SECRET not in out
