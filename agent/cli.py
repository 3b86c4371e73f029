"""`hwagent` command line: a thin dispatcher over agent.commands.*.

Each subcommand lives in its own module under agent/commands with an
``add_parser(subparsers)`` that registers it and sets ``func``; this file only
knows their names, so adding a command never touches another's code.
"""

from __future__ import annotations

import sys

from agent import __version__

#: typing (and collections.abc, ~1.5 ms with collections) is not imported at run time (~3 ms of the
#: CLI's start-up); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

#: subcommand modules, in the order `hwagent --help` lists them
COMMANDS: tuple[str, ...] = (
    "agent.commands.run",
    "agent.commands.topology",
    "agent.commands.devices",
    "agent.commands.slurm",
    "agent.commands.cpus",
    "agent.commands.memory",
    "agent.commands.resources",
    "agent.commands.doctor",
    "agent.commands.probes",
    "agent.commands.explain",
    "agent.commands.launch",
    "agent.commands.ps",
    "agent.commands.describe",
    "agent.commands.stop",
    "agent.commands.signalpod",
    "agent.commands.execpod",
    "agent.commands.rm",
    "agent.commands.admit",
    "agent.commands.logs",
    "agent.commands.install_unit",
    "agent.commands.completion",
    "agent.commands.status",
    "agent.commands.version",
)

#: options that name the daemon, which docker (-H), kubectl (--kubeconfig) and systemctl (--user) users
#: put before the command: there they are moved after it (``hoist_globals``), where argparse reads them
GLOBAL_OPTIONS: tuple[str, ...] = ("--root-dir", "--config")


class CommandError(Exception):
    """An error the user can fix: printed as one line, exit status 2 (or .code)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with ``only`` the one subcommand module named so.

    ``hwagent topology`` should not pay for importing the daemon's, the
    probes' and the config loader's dependencies just to build help text it
    will not print; ``--help`` and unknown names still get the full parser.
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="hwagent",
        description="Node agent for bare-metal machines: topology, devices, CPU policy, pressure.",
        epilog="--root-dir DIR and --config FILE may come before COMMAND too (hwagent --root-dir DIR ps); "
        "`hwagent COMMAND -h` shows a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"hwagent {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        _module(name).add_parser(sub)
    return parser


def _module(name: str) -> Any:
    """The module ``name``, imported: ``importlib.import_module`` without importing importlib (which
    brings warnings; ~0.4 ms of every command's start-up, bench/cli.py)."""
    __import__(name)
    return sys.modules[name]


def _single_command(argv: Sequence[str]) -> str | None:
    """The module of the subcommand ``argv`` starts with, when one module is named after it."""
    if not argv or argv[0].startswith("-"):
        return None
    name = f"agent.commands.{argv[0]}"
    return name if name in COMMANDS else None


def hoist_globals(argv: Sequence[str]) -> list[str]:
    """``argv`` with the ``GLOBAL_OPTIONS`` written before the command moved to just after its name
    (pure): ``--root-dir X ps`` reads as ``ps --root-dir X``. Without a command after them the list
    is left as it is, for argparse to say what is missing."""
    i = 0
    while i < len(argv) and argv[i].partition("=")[0] in GLOBAL_OPTIONS:
        i += 1 if "=" in argv[i] else 2
    if i == 0 or i >= len(argv) or argv[i].startswith("-"):
        return list(argv)
    return [argv[i], *argv[:i], *argv[i + 1:]]


def _unrecognized(parser: argparse.ArgumentParser, command: str, extra: Sequence[str]) -> None:
    """argparse's "unrecognized arguments" said by the subcommand's parser (its usage, not the top
    level's), with the nearest flag it has for a misspelt one. Exits with status 2."""
    import argparse
    from difflib import get_close_matches

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    flags = [s for a in sub._actions for s in a.option_strings]
    near = [m[0] for a in extra if a.startswith("-")
            for m in [get_close_matches(a.partition("=")[0], flags, n=1, cutoff=0.7)] if m]
    hint = f" (did you mean {', '.join(dict.fromkeys(near))}?)" if near else ""
    sub.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


#: the commands whose module reads the usual argument lists without argparse (``fast_args``)
FAST: tuple[str, ...] = ("launch", "ps", "stop", "status", "cpus", "memory", "resources")


def parse(argv: Sequence[str]) -> Any:
    """The namespace ``argv`` means: read by the command's plain reader where it has one and
    recognises every argument (agent.commands._flags: argparse is ~8 ms of a launch's start-up),
    else by argparse, which also prints help and errors (and exits: a wrong flag with the
    subcommand's usage); None (the help printed) when no command is named. ``--root-dir`` and
    ``--config`` may come before the command (``hoist_globals``)."""
    argv = hoist_globals(argv)
    if argv and argv[0] in FAST:
        args = _module(f"agent.commands.{argv[0]}").fast_args(argv[1:])
        if args is not None:
            args.command = argv[0]
            return args
    parser = build_parser(_single_command(argv))
    if argv and (opt := argv[0].partition("=")[0]) in GLOBAL_OPTIONS:  # not hoisted: no command after it
        parser.error(f"{opt} goes with a command: hwagent {opt} VALUE COMMAND ... (e.g. hwagent {opt} VALUE ps)")
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "command", None):
        _unrecognized(parser, args.command, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    if args is None:
        return 2
    try:
        return int(args.func(args) or 0)
    except CommandError as e:
        print(f"hwagent {args.command}: error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the output's reader went away (`| head`): what is still buffered for stdout goes to
        # /dev/null, so that the flush at exit does not fail again (status 120); the signal
        # module's documented way ("Note on SIGPIPE")
        import os

        try:
            fd = sys.stdout.fileno()
        except (AttributeError, ValueError, OSError):  # not a file (a test's capture): nothing buffered there
            return 0
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
        return 0


if __name__ == "__main__":  # pragma: no cover
    # `python -m agent.cli` would load this file twice (as __main__ and as
    # agent.cli), and CommandError raised by a command would not match ours.
    from agent.cli import main as _main

    sys.exit(_main())
