"""The security tier's cast (issue 32): ``alice``, a member of the daemon's socket group,
and ``mallory``, a local user in no group of ours, both made by the tests with names that
cannot clash with a real account's (a random suffix), and removed with their homes
afterwards. Each attack runs as one of them through ``runuser`` against a real daemon,
and asserts that nothing was read, written, run or changed that the attacker could not
reach on their own."""

from __future__ import annotations

import os
import pwd
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.users_support import GROUP, Box, open_box, until

__all__ = ["ALICE", "MALLORY", "GROUP", "Box", "open_box", "until", "as_user", "home", "security_box", "write_as"]

_SUFFIX = uuid.uuid4().hex[:8]
#: a member of the socket group: may launch, may not gain anything it does not have
ALICE = f"hwsa{_SUFFIX}"
#: a local user in no group of ours: may reach nothing of the daemon's
MALLORY = f"hwsm{_SUFFIX}"


def home(user: str) -> Path:
    return Path(pwd.getpwnam(user).pw_dir)


def as_user(user: str, *argv: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Run ``argv`` as ``user`` (a login-less ``runuser``, the user's home as cwd)."""
    kw.setdefault("cwd", str(home(user)))
    return subprocess.run(["runuser", "-u", user, "--", *argv], capture_output=True, text=True,
                          timeout=timeout, **kw)


def security_box(config: dict[str, dict[str, str]] | None = None, **kw) -> Iterator[Box]:
    """A daemon on a root dir alice and mallory can reach (both made here)."""
    yield from open_box(members=(ALICE,), outsiders=(MALLORY,), config=config, **kw)


def write_as(user: str, path: Path, data: bytes | str, mode: int = 0o644) -> Path:
    """A file of ``user``'s own (as if the user wrote it)."""
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    pw = pwd.getpwnam(user)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    os.chmod(path, mode)
    return path
