"""The CLI finds the running daemon's root dir and config from its claim (agent.daemon.running)."""

from __future__ import annotations

import argparse

import pytest

from agent.cli import CommandError
from agent.commands._config import LOCK_DIR_ENV, daemon_root, load_config, root_dir
from agent.cpu.config import CPU_SECTION
from agent.cpuset import CPUSet
from agent.daemon.claim import Claim, ClaimLock
from agent.daemon.running import Ambiguous, Running, choose, running


def _claim(pid: int, root: str, config: str = "", subtree: str = "/t") -> Claim:
    return Claim(pid, root, "/sys/fs/cgroup", (subtree,), CPUSet(), config)


def test_choose_prefers_the_given_root_then_the_default_then_the_only_one():
    a, b = Running(1, "/var/lib/hwagent", "/etc/a.toml"), Running(2, "/srv/b", "")
    assert choose([], "/var/lib/hwagent") is None
    assert choose([b], "/var/lib/hwagent") == b
    assert choose([a, b], "/var/lib/hwagent") == a
    assert choose([a, b], "/var/lib/hwagent", "/srv/b/") == b
    assert choose([a], "/var/lib/hwagent", "/srv/c") is None
    with pytest.raises(Ambiguous, match=r"/srv/b \(pid 2\), /srv/c \(pid 3\).*--root-dir"):
        choose([b, Running(3, "/srv/c", "")], "/var/lib/hwagent")


def test_running_reads_held_claims_only_and_changes_nothing(tmp_path):
    locks = tmp_path / "locks"
    held = ClaimLock(locks)
    held.acquire(_claim(4242, "/srv/x", "/etc/x.toml"))
    gone = ClaimLock(locks)
    gone.acquire(_claim(4343, "/srv/y", subtree="/u"))
    gone._close_all(unlink=False)  # its daemon died (kill -9): the file stays, nobody holds it
    before = sorted(p.name for p in locks.iterdir())
    try:
        assert running(str(locks)) == [Running(4242, "/srv/x", "/etc/x.toml")]
        assert sorted(p.name for p in locks.iterdir()) == before, "a reader removes nothing"
    finally:
        held.release()
    assert running(str(locks)) == []
    assert running(str(tmp_path / "none")) == []


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"config": None, "root_dir": None, **kw})


def test_commands_without_config_use_the_running_daemons(tmp_path, monkeypatch):
    cfg = tmp_path / "hw.toml"
    cfg.write_text(f'[daemon]\nroot_dir = "{tmp_path / "from-file"}"\n[cpu]\nreserved_cpu_list = "0"\n')
    locks = tmp_path / "locks"
    monkeypatch.setenv(LOCK_DIR_ENV, str(locks))
    assert daemon_root(_args()) == root_dir(_args(), load_config(_args())) != tmp_path / "flag-root"
    lock = ClaimLock(locks)
    lock.acquire(_claim(4242, str(tmp_path / "flag-root"), str(cfg)))
    try:
        assert daemon_root(_args()) == tmp_path / "flag-root"
        config = load_config(_args())
        assert config[CPU_SECTION].reserved_cpu_list == "0", "the daemon's file, not the embedded defaults"
        assert root_dir(_args(), config) == tmp_path / "flag-root", "the root the daemon runs on wins over its file's"
        # flags still win, and --config means that file only
        assert daemon_root(_args(root_dir=str(tmp_path / "other"))) == tmp_path / "other"
        other = ClaimLock(locks)
        other.acquire(_claim(4343, str(tmp_path / "second"), subtree="/u"))
        try:
            with pytest.raises(CommandError, match="several hwagent daemons run"):
                daemon_root(_args())
        finally:
            other.release()
    finally:
        lock.release()
