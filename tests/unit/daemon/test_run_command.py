"""`hwagent run` flags over the config file, and config errors as one line, exit 2."""

from __future__ import annotations

import argparse
import tomllib

import pytest

from agent.cli import CommandError
from agent.commands import run as run_cmd


def parse(*argv: str) -> argparse.Namespace:
    # only this command's parser: the test does not depend on the other subcommands
    parser = argparse.ArgumentParser(prog="hwagent")
    run_cmd.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["run", *argv])


def test_defaults_without_config():
    d = run_cmd.effective_config(parse()).sections["daemon"]
    assert d.root_dir == "/var/lib/hwagent" and d.metrics_address == "127.0.0.1:9464"


def test_flags_override_the_file(tmp_path, monkeypatch):
    cfg_file = tmp_path / "hw.toml"
    cfg_file.write_text(
        '[daemon]\nroot_dir = "/srv/file"\nmetrics_address = "127.0.0.1:1"\nlog_level = "error"\nmode = "kubelet"\n'
        'kubelet_root_dir = "/srv/kubelet"\n'
    )
    monkeypatch.chdir(tmp_path)
    d = run_cmd.effective_config(
        parse("--config", str(cfg_file), "--root-dir", "rel/root", "--metrics-address", "[::1]:0",
              "--log-level", "debug", "--mode", "standalone")
    ).sections["daemon"]
    assert d.root_dir == str(tmp_path / "rel" / "root")  # relative to where the operator stands
    assert d.metrics_address == "[::1]:0"
    assert d.log_level == "debug"
    assert d.mode == "standalone"
    assert d.kubelet_root_dir == "/srv/kubelet"  # not overridden: the file's value stays


def test_print_config_shows_the_merge(tmp_path, capsys):
    cfg_file = tmp_path / "hw.toml"
    cfg_file.write_text('[daemon]\nstop_timeout_seconds = 4\n')
    args = parse("--config", str(cfg_file), "--log-level", "warning", "--print-config")
    assert args.func(args) == 0
    printed = tomllib.loads(capsys.readouterr().out)
    assert printed["daemon"]["stop_timeout_seconds"] == 4.0
    assert printed["daemon"]["log_level"] == "warning"
    assert printed["daemon"]["root_dir"] == "/var/lib/hwagent"
    assert not (tmp_path / "var").exists()  # printing starts nothing


@pytest.mark.parametrize(
    "argv, expected",
    [
        (("--metrics-address", "9464"), "daemon.metrics_address: must be HOST:PORT"),
        (("--metrics-address", "localhost:70000"), "daemon.metrics_address: port must be 0-65535"),
    ],
)
def test_bad_flag_values_are_config_errors(argv, expected):
    args = parse(*argv)
    with pytest.raises(CommandError) as e:
        args.func(args)
    assert e.value.code == 2
    assert str(e.value).startswith(expected)


def test_bad_file_is_exit_2_naming_the_key(tmp_path):
    cfg_file = tmp_path / "hw.toml"
    cfg_file.write_text("[daemon]\nmetrics_adress = '127.0.0.1:1'\n")
    args = parse("--config", str(cfg_file))
    with pytest.raises(CommandError) as e:
        args.func(args)
    assert e.value.code == 2
    assert str(e.value).startswith(f"{cfg_file}: daemon.metrics_adress: unknown key (did you mean 'metrics_address'?")


def test_unknown_log_level_is_refused_by_argparse():
    with pytest.raises(SystemExit) as e:
        parse("--log-level", "loud")
    assert e.value.code == 2
