"""Issue 37 item 14: the offline commands read the running daemon's config, and can be told which.

A daemon's claim (agent.daemon.running) names its root dir and config file; a command given no
``--config`` reads that file. With several daemons and none on the default root dir, the CLI asks
for ``--root-dir DIR``: ``devices`` and ``probes`` did not take that flag, so they could not be
pointed at either daemon at all. The daemons here are claims held under flock by the test
(what a live daemon's claim is), each naming a config with a resource rule of its own.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cli import main
from agent.commands._exitcodes import EXIT_USAGE
from tests.unit.devices.fakesysfs import FakeSysfs


@pytest.fixture
def two_daemons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    locks = tmp_path / "locks"
    locks.mkdir()
    monkeypatch.setenv("HWAGENT_LOCK_DIR", str(locks))
    roots: dict[str, Path] = {}
    fds = []
    for i, name in enumerate(("first", "second")):
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(f'[[devices.resources]]\nname = "example.com/{name}"\nblock_name = ["loop*"]\n')
        roots[name] = tmp_path / f"root-{name}"
        claim = locks / f"claim{i}.lock"
        claim.write_text(json.dumps({"pid": 1000 + i, "root_dir": str(roots[name]), "cgroup_root": "/sys/fs/cgroup",
                                     "subtrees": [f"/t{i}"], "cpus": "", "config": str(cfg)}))
        fd = os.open(claim, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held, as a live daemon holds its claim
        fds.append(fd)
    try:
        yield roots
    finally:
        for fd in fds:
            os.close(fd)


def _offered(tmp_path: Path, capsys, *argv: str) -> tuple[int, set[str], str]:
    fs = FakeSysfs(tmp_path / "sys")
    fs.virtual_block("loop3", "7:3")
    try:
        rc = main([*argv, "--sysfs-root", str(fs.root), "--format", "json"])
    except SystemExit as e:
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    got = {d["resource"] for d in json.loads(out)["devices"]} if rc == 0 else set()
    return rc, got, err


def test_devices_asks_which_daemon_and_takes_root_dir(tmp_path, capsys, two_daemons) -> None:
    rc, _, err = _offered(tmp_path, capsys, "devices")
    assert rc == EXIT_USAGE and "choose one with --root-dir DIR" in err, err
    rc, got, err = _offered(tmp_path, capsys, "devices", "--root-dir", str(two_daemons["second"]))
    assert rc == 0 and got == {"example.com/second"}, (rc, got, err)
    rc, got, err = _offered(tmp_path, capsys, "--root-dir", str(two_daemons["first"]), "devices")
    assert rc == 0 and got == {"example.com/first"}, (rc, got, err)


def test_probes_takes_root_dir(tmp_path, capsys, two_daemons) -> None:
    """(probes loads BPF when it runs: an --interval it refuses shows the flags were taken)"""
    try:
        rc = main(["probes", "--root-dir", str(two_daemons["first"]), "--interval", "0"])
    except SystemExit as e:
        rc = int(e.code or 0)
    assert rc == EXIT_USAGE and "--interval must be > 0" in capsys.readouterr().err
