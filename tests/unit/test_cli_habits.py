"""Issue 37 item 6: what docker, kubectl and systemctl users type first.

Global options before the command (``docker -H``, ``kubectl --kubeconfig``), a wrong flag
answered with the subcommand's usage (not the top level's), the short forms people type
(``ps -a``/``-q``, ``rm -f``, ``exec -it``, ``launch -d``, ``-m``, ``stop -t``), and a
``version`` command. Each runs the real CLI against a root dir where no daemon runs: exit 5
("the daemon is not running") shows the command line was understood and the command went
as far as asking the daemon.
"""

from __future__ import annotations

import pytest

from agent import __version__
from agent import cli
from agent.cli import main
from agent.commands._exitcodes import EXIT_NO_DAEMON, EXIT_USAGE


def _run(capsys, *argv: str) -> tuple[int, str]:
    try:
        rc = main(list(argv))
    except SystemExit as e:  # argparse's errors
        rc = int(e.code or 0)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("before", [["--root-dir", "{root}"], ["--root-dir={root}"],
                                    ["--config", "{cfg}", "--root-dir", "{root}"], ["--config={cfg}"]])
@pytest.mark.parametrize("command", [["ps"], ["stop", "job"], ["describe", "job"], ["launch", "--", "true"],
                                     ["logs", "job"]])
def test_global_options_before_the_command_are_taken(tmp_path, capsys, before, command) -> None:
    cfg = tmp_path / "hw.toml"
    cfg.write_text(f'[daemon]\nroot_dir = "{tmp_path / "fromcfg"}"\n')
    argv = [a.format(root=tmp_path / "r", cfg=cfg) for a in before] + command
    rc, err = _run(capsys, *argv)
    want = 3 if command[0] == "logs" else EXIT_NO_DAEMON  # logs reads files: no such pod there
    assert rc == want, err
    assert "invalid choice" not in err and "usage:" not in err
    where = "fromcfg" if "--root-dir" not in " ".join(before) else "/r"
    assert where in err, err  # the option was applied, not dropped


def test_hoisting_is_pure_and_leaves_the_rest_alone() -> None:
    assert cli.hoist_globals(["--root-dir", "/r", "ps", "--format", "json"]) == ["ps", "--root-dir", "/r", "--format", "json"]
    assert cli.hoist_globals(["ps", "--root-dir", "/r"]) == ["ps", "--root-dir", "/r"]
    assert cli.hoist_globals(["--root-dir", "/r", "launch", "--", "ls", "--config", "x"]) == \
        ["launch", "--root-dir", "/r", "--", "ls", "--config", "x"]
    assert cli.hoist_globals(["--root-dir"]) == ["--root-dir"]  # argparse says what is missing
    assert cli.hoist_globals(["--version"]) == ["--version"]


@pytest.mark.parametrize("argv", [["--root-dir", "/r"], ["--root-dir=/r"], ["--config", "f", "--version"]])
def test_a_global_option_without_a_command_says_where_it_goes(capsys, argv) -> None:
    rc, err = _run(capsys, *argv)
    assert rc == EXIT_USAGE and "goes with a command" in err and "invalid choice" not in err, err


def test_a_global_option_the_command_does_not_take_is_said_by_that_command(capsys) -> None:
    rc, err = _run(capsys, "--root-dir", "/r", "doctor")
    assert rc == EXIT_USAGE
    assert "usage: hwagent doctor" in err and "--root-dir" in err, err


@pytest.mark.parametrize("argv,usage", [(["stop", "--time", "1", "x"], "hwagent stop"),
                                        (["ps", "--bogus"], "hwagent ps"),
                                        (["rm", "--bogus", "x"], "hwagent rm"),
                                        (["describe", "--fromat=json", "x"], "hwagent describe")])
def test_a_wrong_flag_prints_the_subcommands_usage(capsys, argv, usage) -> None:
    rc, err = _run(capsys, *argv)
    assert rc == EXIT_USAGE
    assert f"usage: {usage}" in err and "usage: hwagent [-h]" not in err, err
    assert f"{usage}: error: unrecognized arguments: {argv[1]}" in err, err


def test_a_near_miss_is_given_the_flag_it_meant(capsys) -> None:
    rc, err = _run(capsys, "describe", "x", "--fromat", "json")
    assert rc == EXIT_USAGE and "did you mean --format?" in err, err


@pytest.mark.parametrize("argv", [
    ["ps", "-a"], ["ps", "-q"], ["ps", "-aq"], ["ps", "-a", "-q"], ["ps", "--all", "--quiet"],
    ["rm", "-f", "job"], ["rm", "--force", "a", "b"],
    ["stop", "-t", "1", "job"], ["stop", "job", "-t", "0"],
    ["exec", "-it", "job", "--", "sh"], ["exec", "-i", "job", "--", "sh"], ["exec", "job", "-it", "--", "sh"],
    ["launch", "-d", "--", "true"], ["launch", "-d", "-m", "64Mi", "--", "true"], ["launch", "-m=64Mi", "--", "true"],
])
def test_short_forms_people_type(tmp_path, capsys, argv) -> None:
    rc, err = _run(capsys, argv[0], "--root-dir", str(tmp_path), *argv[1:])
    assert rc == EXIT_NO_DAEMON, err


def test_launch_detach_and_wait_exclude_each_other(tmp_path, capsys) -> None:
    rc, err = _run(capsys, "launch", "--root-dir", str(tmp_path), "-d", "--wait", "--", "true")
    assert rc == EXIT_USAGE and "not allowed with" in err, err


def test_version_command(capsys) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"hwagent {__version__}"


def test_the_entry_script_skips_the_same_global_options() -> None:
    """The entry script finds a light command behind them (agent.commands._entry) without importing agent.cli."""
    from agent.commands._entry import GLOBAL, LIGHT

    assert set(GLOBAL) == set(cli.GLOBAL_OPTIONS) and "version" in LIGHT
