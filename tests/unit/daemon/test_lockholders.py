"""agent.daemon.lockholders: the pids /proc/locks names as holding a flock on one file."""

from __future__ import annotations

import fcntl
import os

from agent.daemon.lockholders import flock_holders, holders_of, squatted

TEXT = ("1: FLOCK  ADVISORY  WRITE 17479 fe:00:2417303 0 EOF\n"
        "1: -> FLOCK  ADVISORY  WRITE 20001 fe:00:2417303 0 EOF\n"
        "2: POSIX  ADVISORY  WRITE 30000 fe:00:2417303 0 EOF\n"
        "3: FLOCK  ADVISORY  READ 555 08:01:2417303 0 EOF\n"
        "4: OFDLCK ADVISORY  WRITE -1 fe:00:99 0 EOF\n")


def test_only_granted_flocks_on_that_device_and_inode_count() -> None:
    assert flock_holders(TEXT, 0xFE, 0, 2417303) == [17479]
    assert flock_holders(TEXT, 8, 1, 2417303) == [555]
    assert flock_holders(TEXT, 0xFE, 0, 99) == []


def test_a_lock_this_process_holds_is_not_a_squatters(tmp_path) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        assert not squatted(fd)  # nobody holds it
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert holders_of(fd) == [os.getpid()]
        assert not squatted(fd)  # held by this user's process
    finally:
        os.close(fd)
