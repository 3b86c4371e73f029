"""install-unit creates the admission socket's group (a real system group on this machine).

The tests use a group name of their own and delete it afterwards only when they
created it; the unit and config files go under tmp_path, and systemctl is never run.
"""

from __future__ import annotations

import grp
import os
import subprocess

import pytest

from agent.cli import main
from agent.commands import install_unit

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="groupadd needs root")


@pytest.fixture
def group_name():
    name = f"hwagent-t{os.getpid() % 100000}"
    try:
        grp.getgrnam(name)
    except KeyError:
        pass
    else:
        pytest.skip(f"group {name} exists already: not this test's to create or delete")
    yield name
    try:
        grp.getgrnam(name)
    except KeyError:
        return
    subprocess.run(["groupdel", name], check=True)


@pytest.fixture
def no_systemd(tmp_path, monkeypatch):
    # the unit goes to tmp_path: no daemon-reload of the machine's systemd
    monkeypatch.setattr(install_unit, "SYSTEMD_RUN_DIR", tmp_path / "no-systemd")


def _argv(tmp_path, *extra: str) -> list[str]:
    return ["install-unit", "--unit-dir", str(tmp_path / "units"), "--config", str(tmp_path / "etc" / "config.toml"),
            "--exe", "/opt/hwagent/bin/hwagent", *extra]


def test_creates_the_system_group_once_and_says_so(tmp_path, group_name, no_systemd, capsys):
    assert main(_argv(tmp_path, "--group", group_name)) == 0
    out = capsys.readouterr().out
    g = grp.getgrnam(group_name)
    assert g.gr_gid < 1000, "a --system group takes a gid below UID_MIN"
    assert f"created system group {group_name}" in out and f"usermod -a -G {group_name}" in out, out
    assert (tmp_path / "units" / "hwagent.service").is_file()

    # a second run finds it and changes nothing
    assert main(_argv(tmp_path, "--group", group_name)) == 0
    out = capsys.readouterr().out
    assert f"group {group_name} exists" in out and "created" not in out, out
    assert grp.getgrnam(group_name).gr_gid == g.gr_gid


def test_the_config_file_names_the_group(tmp_path, group_name, no_systemd, capsys):
    cfg = tmp_path / "etc" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text(f'[workloads]\nsocket_group = "{group_name}"\n')
    assert main(_argv(tmp_path)) == 0
    assert f"created system group {group_name}" in capsys.readouterr().out
    grp.getgrnam(group_name)


def test_dry_run_and_dest_create_no_group(tmp_path, group_name, no_systemd, capsys):
    assert main(_argv(tmp_path, "--group", group_name, "--dry-run")) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("[Unit]") or "ExecStart=" in cap.out  # stdout stays the unit alone
    assert f"would create system group {group_name}" in cap.err, cap.err
    assert main(["install-unit", "--dest", str(tmp_path / "img"), "--exe", "/opt/hwagent/bin/hwagent",
                 "--group", group_name]) == 0
    out = capsys.readouterr().out
    assert f"groupadd --system {group_name}" in out and "not created" in out, out
    with pytest.raises(KeyError):
        grp.getgrnam(group_name)


def test_an_empty_group_skips_it(tmp_path, no_systemd, capsys):
    assert main(_argv(tmp_path, "--group", "")) == 0
    assert "root only" in capsys.readouterr().out
