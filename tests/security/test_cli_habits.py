"""Issue 37: what a user of the CLI meets, tried as real users against a real daemon.

``hwagent logs`` reads the pod's log files directly (it works with the daemon down). Another
user's pod must read exactly as a pod that does not exist: "cannot read ...: Permission
denied" told mallory that alice's pod is there, and a missing pod exited 2 (usage) where the
table of docs/commands/README.md says 3.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.security.support import ALICE, MALLORY, Box, security_box


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    yield from security_box()


def test_another_users_pod_reads_as_no_pod_in_logs(box: Box) -> None:
    r = box.cli(ALICE, "launch", "--name", "secretjob", "--", "sh", "-c", "echo hidden; sleep 600")
    assert r.returncode == 0, r.stderr
    try:
        theirs = box.cli(MALLORY, "logs", "secretjob")
        missing = box.cli(MALLORY, "logs", "nosuchjob")
        assert missing.returncode == 3, missing.stderr
        assert theirs.returncode == 3 and "hidden" not in theirs.stdout, (theirs.returncode, theirs.stderr)
        assert "no pod default/secretjob" in theirs.stderr and "Permission denied" not in theirs.stderr
        # the same words for both: nothing tells the two apart but the name
        assert theirs.stderr.replace("secretjob", "X") == missing.stderr.replace("nosuchjob", "X")
    finally:
        box.cli(None, "rm", "secretjob")
