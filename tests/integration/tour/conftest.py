"""A daemon as a new user meets it (issue 37): standalone, its runtime on, pods under a
cgroup subtree of the test's own, the CLI run as a user types it. Module-scoped: each
module's pods live beside each other as on a real box, and go with the daemon."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cgroup_support import kill_and_remove_subtree
from tests.integration.daemon.test_lifecycle import Daemon
from tests.integration.runtime.test_end_to_end import BUDGET_S, HWAGENT, until


@dataclass
class Tour:
    root: Path
    daemon: Daemon

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        argv = [str(HWAGENT), args[0], "--root-dir", str(self.root), *args[1:]]
        return subprocess.run(argv, capture_output=True, text=True, timeout=BUDGET_S, cwd="/")

    def ok(self, *args: str) -> str:
        r = self.cli(*args)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r.stdout


def open_tour(config: dict[str, dict[str, str]] | None = None) -> Iterator[Tour]:
    """A running daemon; ``config``: section -> key -> TOML literal, over pressure and
    devices off and the test's own cgroup subtree."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a daemon with its runtime)")
    base = Path(tempfile.mkdtemp(prefix="hwtour-"))
    subtree = f"/hwagent-test-tour-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    sections: dict[str, dict[str, str]] = {"pressure": {"enabled": "false"}, "devices": {"enabled": "false"},
                                           "runtime": {"cgroup_subtree": f'"{subtree}"'}}
    for name, keys in (config or {}).items():
        sections.setdefault(name, {}).update(keys)
    cfg = base / "hwagent.toml"
    cfg.write_text("".join(f"[{n}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items()) for n, keys in sections.items()))
    daemon = None
    try:
        daemon = Daemon(base / "d", "--config", str(cfg), "--root-dir", str(base / "root"))
        until(lambda: "hwagent ready" in daemon.log(), "the daemon to be ready", daemon)
        yield Tour(base / "root", daemon)
        assert daemon.stop() == 0, daemon.log()
    finally:
        if daemon is not None:
            daemon.cleanup()
        kill_and_remove_subtree(subtree)
        shutil.rmtree(base, ignore_errors=True)
