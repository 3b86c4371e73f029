"""Real users for the users tests (issue 23): hwtest1 and hwtest2 (``useradd -m``), the
``hwagent`` group they are in (created here when the machine has none), a daemon on a
root dir they can reach, and the CLI run as each of them (``runuser``).

Everything made here is removed at the end of the module that used it: the users
with their homes, the group when this module made it, the daemon, its cgroup subtree.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.daemon.test_lifecycle import Daemon
from tests.cgroup_support import kill_and_remove_subtree
from tests.integration.runtime.test_end_to_end import BUDGET_S, until

HWAGENT = Path(sys.executable).parent / "hwagent"
USERS = ("hwtest1", "hwtest2")
GROUP = "hwagent"




def proc_ids(pid: int) -> dict[str, list[int]]:
    """Uid, Gid and Groups of a process, as /proc/<pid>/status lists them."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "Groups"):
            out[key] = [int(v) for v in value.split()]
    return out


@dataclass
class Box:
    """A daemon with users: ``cli(user, ...)`` runs the hwagent CLI as ``user`` (None: root)."""

    root: Path
    daemon: Daemon

    def cli(self, user: str | None, *args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
        argv = [str(HWAGENT), args[0], "--root-dir", str(self.root), *args[1:]]
        if user is not None:
            argv = ["runuser", "-u", user, "--", *argv]
            cwd = cwd or pwd.getpwnam(user).pw_dir
        return subprocess.run(argv, capture_output=True, text=True, timeout=BUDGET_S, cwd=cwd or "/")

    def pods(self, user: str | None) -> list[dict]:
        r = self.cli(user, "ps", "--format", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["pods"]

    def pod(self, name: str, user: str | None = None) -> dict | None:
        return next((p for p in self.pods(user) if p["name"] == name), None)

    def running(self, name: str, user: str | None = None) -> dict:
        return until(lambda: (p := self.pod(name, user)) and p["phase"] == "Running" and p["containers"][0]["pid"]
                     and p, f"pod {name} to run", self.daemon)


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


def open_box(members: tuple[str, ...] = USERS, outsiders: tuple[str, ...] = (),
             config: dict[str, dict[str, str]] | None = None,
             group: str = GROUP, daemon_args: tuple[str, ...] = (), nofile: int | None = None) -> Iterator[Box]:
    """A daemon with real users: ``members`` in ``group`` (created when the machine has none),
    ``outsiders`` in no group of ours, ``config`` merged into the daemon's TOML (section ->
    key -> a TOML literal, e.g. ``{"pressure": {"enabled": "true"}}``). Users this
    made are removed with their homes afterwards, and so is the group; a user that already
    existed is left as it was (only added to the group)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (useradd, a daemon)")
    if shutil.which("useradd") is None or shutil.which("runuser") is None:
        pytest.skip("needs useradd and runuser")
    made_group = False
    try:
        grp.getgrnam(group)
    except KeyError:
        _run("groupadd", "--system", group)
        made_group = True
    made_users = []
    base = Path(tempfile.mkdtemp(prefix="hwusers-"))
    os.chmod(base, 0o755)  # the users reach <root>/admission.sock and <root>/logs through it
    subtree = f"/hwagent-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    daemon = None
    try:
        for u in (*members, *outsiders):
            if subprocess.run(["getent", "passwd", u], capture_output=True).returncode != 0:
                _run("useradd", "-m", *(("-G", group) if u in members else ()), u)
                made_users.append(u)
            elif u in members:
                _run("usermod", "-a", "-G", group, u)
        cfg = base / "hwagent.toml"
        sections: dict[str, dict[str, str]] = {
            "pressure": {"enabled": "false"}, "devices": {"enabled": "false"},
            "runtime": {"cgroup_subtree": f'"{subtree}"'}, "workloads": {"socket_group": f'"{group}"'}}
        for name, keys in (config or {}).items():
            sections.setdefault(name, {}).update(keys)
        cfg.write_text("".join(f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items())
                               for name, keys in sections.items()))
        daemon = Daemon(base / "d", "--config", str(cfg), "--root-dir", str(base / "root"), *daemon_args,
                        nofile=nofile)
        until(lambda: "hwagent ready" in daemon.log(), "the daemon to be ready", daemon)
        yield Box(base / "root", daemon)
        assert daemon.stop() == 0, daemon.log()
    finally:
        if daemon is not None:
            daemon.cleanup()
        _remove_subtree(subtree)  # the pods' processes (by pid, from their cgroups) before their users go
        for u in made_users:
            subprocess.run(["userdel", "-r", u], capture_output=True)
        if made_group:
            subprocess.run(["groupdel", group], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    yield from open_box()


def _remove_subtree(name: str) -> None:
    kill_and_remove_subtree(name)
