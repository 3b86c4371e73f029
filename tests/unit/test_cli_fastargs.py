"""The plain reader of launch, ps and stop (agent.commands._flags) gives argparse's namespace, or
leaves the argument list to argparse.

The hot commands read their usual argument lists without importing argparse (~8 ms of a
launch's start-up, bench/cli.py); argparse stays the reader of everything else (help,
abbreviations, errors). Both readers take the one flag table of each command; this table of
argument lists checks that whatever the plain reader answers is what argparse answers.
"""

from __future__ import annotations

import pytest

from agent.cli import FAST, build_parser, parse

#: argument lists the plain reader must read, as argparse does
READ = [
    ["ps"],
    ["ps", "--format", "json"],
    ["ps", "--root-dir", "/r", "--format=json"],
    ["stop", "job"],
    ["stop", "job", "--grace", "5"],
    ["stop", "--namespace", "ns", "job", "--root-dir", "/r"],
    ["stop", "--grace=0.5", "job"],
    ["launch", "--", "true"],
    ["launch", "true"],
    ["launch", "--wait", "--rm", "-q", "--cpus", "1", "--", "true"],
    ["launch", "--root-dir", "/r", "--wait", "--rm", "-q", "--cpus", "1", "--", "true"],
    ["launch", "--cpu-request", "500m", "--qos", "shared", "--", "sh", "-c", "exit 3"],
    ["launch", "--qos", "dedicated", "--numa-binding", "--memory", "256Mi", "--hugepages-2Mi", "64Mi",
     "--hugepages-spread", "--", "a", "--wait"],
    ["launch", "-e", "A=1", "--env", "B=2", "--env=C=3", "--env-file", "f", "-w", "/tmp", "--", "x"],
    ["launch", "--device", "example.com/gpu=1", "--device", "example.com/gpu=2", "--restart", "on-failure", "x"],
    ["launch", "--name", "a", "--name", "b", "--namespace", "ns", "--container", "c", "--user", "1000:1000", "x"],
    ["launch", "-f", "pod.yaml", "--ignore-unknown-fields", "--format", "json"],
    ["launch", "--cpus", "2", "x", "--cpus", "3"],
    ["launch", "--cpus", "0.5", "--", "x"],
    ["launch", "--cpus=500m", "--", "x"],
    ["launch"],
    ["launch", "--"],
    ["launch", "-", "x"],
    # the read commands that ask the status socket (issue 37 item 16)
    ["status"],
    ["status", "--root-dir", "/r", "--format", "json"],
    ["cpus", "--format=json", "--sysfs-root", "/s"],
    ["cpus", "--socket", "/p.sock", "--config", "c.toml"],
    ["memory", "--root-dir", "/r"],
    ["resources", "--checkpoint", "/c", "--format", "json"],
]

#: argument lists left to argparse: help, abbreviations, combined flags, mistakes
DECLINED = [
    ["ps", "-h"],
    ["cpus", "--json"],
    ["status", "--format", "yaml"],
    ["memory", "x"],
    ["ps", "--form", "json"],
    ["ps", "--format", "yaml"],
    ["ps", "x"],
    ["stop"],
    ["stop", "a", "b"],
    ["stop", "job", "--grace", "soon"],
    ["stop", "--", "job"],
    ["stop", "job", "--grace", "-1"],
    ["launch", "--help"],
    ["launch", "--cpus", "1", "--cpu-request", "500m", "--", "x"],
    ["launch", "--cpus", "one", "--", "x"],
    ["launch", "--cpus", "0", "--", "x"],
    ["launch", "--cpus", "0.0001", "--", "x"],
    ["launch", "--qos", "gold", "--", "x"],
    ["launch", "--wai", "--", "x"],
    ["launch", "-qe", "A=1", "--", "x"],
    ["launch", "-eA=1", "--", "x"],
    ["launch", "--wait=yes", "--", "x"],
    ["launch", "--name"],
    ["launch", "-f", "-"],
]


def argparse_args(argv: list[str]) -> dict[str, object]:
    return vars(build_parser(f"agent.commands.{argv[0]}").parse_args(argv))


def fast_args(argv: list[str]) -> object:
    from importlib import import_module

    return import_module(f"agent.commands.{argv[0]}").fast_args(argv[1:])


@pytest.mark.parametrize("argv", READ, ids=" ".join)
def test_the_plain_reader_answers_what_argparse_answers(argv: list[str]) -> None:
    fast = fast_args(argv)
    assert fast is not None, f"{argv} should be read without argparse"
    assert vars(parse(argv)) == argparse_args(argv)


@pytest.mark.parametrize("argv", DECLINED, ids=" ".join)
def test_what_the_plain_reader_does_not_recognise_goes_to_argparse(argv: list[str], capsys) -> None:
    assert fast_args(argv) is None
    try:
        expected: object = argparse_args(argv)
    except SystemExit as e:
        expected = ("exit", e.code)
    try:
        got: object = vars(parse(argv))
    except SystemExit as e:
        got = ("exit", e.code)
    assert got == expected


def test_the_fast_commands_each_have_a_reader() -> None:
    for name in FAST:
        assert fast_args([name]) is not None or name == "stop"
