"""Lookups as a user in a thread of their own (agent.workloads.asuser, issue 32 item 5): the
thread sees what the user sees, and the daemon's other threads keep root's identity."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time

import pytest

from agent.contracts.pods import RunAs
from agent.workloads import asuser
from agent.workloads.asuser import LookupStuck, as_user
from agent.workloads.runnable import dir_error

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing a thread's identity needs root")

NOBODY = RunAs(65534, 65534, (65534,))


def _ids() -> tuple[str, str]:
    """This thread's fs uid line and groups, as /proc says them."""
    status = open(f"/proc/self/task/{threading.get_native_id()}/status").read()
    uid = next(ln for ln in status.splitlines() if ln.startswith("Uid:")).split()[4]
    groups = next(ln for ln in status.splitlines() if ln.startswith("Groups:"))
    return uid, groups


def test_the_lookup_sees_what_the_user_sees_and_root_keeps_its_own(tmp_path):
    private = tmp_path / "private"
    (private / "present").mkdir(parents=True)
    os.chmod(tmp_path, 0o755)
    os.chmod(private, 0o700)
    before = _ids()

    async def main() -> tuple[int, int, tuple[str, str]]:
        present = await as_user(NOBODY, lambda: dir_error(str(private / "present")))
        absent = await as_user(NOBODY, lambda: dir_error(str(private / "absent")))
        ids = await as_user(NOBODY, _ids)
        return present, absent, ids

    present, absent, ids = asyncio.run(main())
    assert present == absent == errno.EACCES  # the same answer whether or not it is there
    assert ids[0] == "65534" and ids[1].split()[1:] == ["65534"]
    assert _ids() == before  # the loop's thread kept root's
    assert dir_error(str(private / "present")) == 0 and dir_error(str(private / "absent")) == errno.ENOENT


def test_a_lookup_that_hangs_is_given_up_and_a_user_cannot_pile_them_up():
    release = threading.Event()

    async def main() -> list[str]:
        out = []
        for _ in range(asuser.MAX_PENDING + 1):
            try:
                await as_user(NOBODY, release.wait, timeout_s=0.1)
            except LookupStuck as e:
                out.append(str(e))
        return out

    t0 = time.monotonic()
    try:
        answers = asyncio.run(main())
    finally:
        release.set()
    assert time.monotonic() - t0 < 5
    assert "did not end in 0.1 s" in answers[0]
    assert "have not ended" in answers[-1]  # refused without a thread
    until = time.monotonic() + 5
    while asuser._pending and time.monotonic() < until:
        time.sleep(0.01)


def test_what_the_lookup_raises_comes_back():
    async def main() -> None:
        await as_user(NOBODY, lambda: os.listdir("/root"))

    if os.stat("/root").st_mode & 0o005:
        pytest.skip("/root is open to others here")
    with pytest.raises(PermissionError):
        asyncio.run(main())
