"""The flags of the hot commands (launch, ps, stop), defined once: argparse is built from them, and
a plain reader takes the argument lists they are usually given without importing argparse.

argparse (with ``re``, ``gettext``, ``locale`` and ``shutil`` for its help formatter) was about
8 ms of the ~37 ms a ``hwagent launch --wait`` client spent (bench/cli.py, docs/performance.md),
more than all of ``srun``'s client. A ``Flag`` here is what ``add_argument`` is given; ``add``
registers a table with argparse (help, errors, completion and the generated manual read that
parser) and ``parse`` reads an argument list with the same table. ``parse`` answers only when it
recognises every argument exactly as argparse would take it: an exact flag name (or
``--flag=value``), a value that does not start with ``-``, a valid choice, a number that
converts, at most one flag of an exclusive group, the positionals the command takes. Anything
else (``-h``, an abbreviation, a combined short flag, a mistake) is ``None`` and the caller runs
argparse, which prints the help or the error. tests/unit/test_cli_fastargs.py checks that both
readers give the same namespace for a table of argument lists.
"""

from __future__ import annotations

import sys

#: typing is not imported at run time (~3 ms of the CLI's start-up); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from types import SimpleNamespace
    from typing import Any
else:
    #: types.SimpleNamespace without importing types (a launch imports nothing else of it)
    SimpleNamespace = type(sys.implementation)

__all__ = ["Flag", "add", "parse", "VALUE", "SWITCH", "APPEND"]

#: the kinds of flag: one value (stored, last wins), a switch, a repeatable value (appended)
VALUE, SWITCH, APPEND = "value", "switch", "append"


class Flag:
    """One option: its names, and what ``add_argument`` takes (``kind`` as above; ``group`` names a
    mutually exclusive group; ``convert`` is argparse's ``type``)."""

    __slots__ = ("names", "dest", "kind", "default", "convert", "choices", "group", "metavar", "help")

    def __init__(self, *names: str, kind: str = VALUE, dest: str | None = None, default: Any = None,
                 convert: Callable[[str], Any] | None = None, choices: Sequence[str] | None = None,
                 group: str | None = None, metavar: str | None = None, help: str | None = None) -> None:
        self.names = names
        self.dest = dest or names[-1].lstrip("-").replace("-", "_")
        self.kind = kind
        self.default: Any = [] if kind == APPEND and default is None else (False if kind == SWITCH else default)
        self.convert = convert
        self.choices = tuple(choices) if choices is not None else None
        self.group = group
        self.metavar = metavar
        self.help = help


def add(parser: argparse.ArgumentParser, flags: Sequence[Flag]) -> None:
    """Register ``flags`` with argparse, each as ``add_argument`` would have been called by hand."""
    groups: dict[str, Any] = {}
    for f in flags:
        target: Any = parser
        if f.group is not None:
            target = groups.get(f.group) or groups.setdefault(f.group, parser.add_mutually_exclusive_group())
        kw: dict[str, Any] = {"dest": f.dest, "help": f.help}
        if f.kind == SWITCH:
            kw["action"] = "store_true"
        else:
            kw["metavar"] = f.metavar
            if f.kind == APPEND:
                kw["action"] = "append"
                kw["default"] = f.default
            elif f.default is not None:
                kw["default"] = f.default
            if f.convert is not None:
                kw["type"] = f.convert
            if f.choices is not None:
                kw["choices"] = f.choices
        target.add_argument(*f.names, **{k: v for k, v in kw.items() if v is not None or k == "help"})


def parse(flags: Sequence[Flag], argv: Sequence[str], positionals: Sequence[str] = (), rest: str | None = None,
          **defaults: Any) -> SimpleNamespace | None:
    """``argv`` (after the command's name) read with ``flags``, ``positionals`` (names, one argument
    each) and ``rest`` (the name of an ``argparse.REMAINDER`` positional: the first other argument or
    ``--`` and all after it, ``--`` kept as argparse keeps it); None where argparse is needed."""
    by_name = {n: f for f in flags for n in f.names}
    values: dict[str, Any] = {f.dest: list(f.default) if f.kind == APPEND else f.default for f in flags}
    if rest is not None:
        values[rest] = []
    seen_groups: dict[str, str] = {}
    got: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-" or not arg.startswith("-"):
            if len(got) < len(positionals):
                got.append(arg)
                i += 1
                continue
        if arg == "-" or not arg.startswith("-") or arg == "--":
            if rest is None:
                return None
            values[rest] = list(argv[i:])
            break
        name, eq, inline = arg.partition("=")
        flag = by_name.get(name if eq and name.startswith("--") else arg)
        if flag is None or (flag.group is not None and seen_groups.setdefault(flag.group, flag.dest) != flag.dest):
            return None
        taken = _value(flag, argv, i, inline if eq else None)
        if taken is None:
            return None
        value, i = taken
        if flag.kind == APPEND:
            values[flag.dest].append(value)
        else:
            values[flag.dest] = value
    if len(got) != len(positionals):
        return None
    values.update(zip(positionals, got, strict=True))
    values.update(defaults)
    return SimpleNamespace(**values)


def _value(flag: Flag, argv: Sequence[str], i: int, inline: str | None) -> tuple[Any, int] | None:
    """(the value of ``flag`` at ``argv[i]``, the index after it), or None where argparse would
    refuse it or read it otherwise (a value that starts with ``-``, a bad number or choice)."""
    if flag.kind == SWITCH:
        return None if inline is not None else (True, i + 1)
    if inline is None:
        if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
            return None
        inline, i = argv[i + 1], i + 1
    value: Any = inline
    if flag.convert is not None:
        try:
            value = flag.convert(inline)
        except ValueError:
            return None
    if flag.choices is not None and value not in flag.choices:
        return None
    return value, i + 1
