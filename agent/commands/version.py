"""`hwagent version`: the version, as `docker version` and `kubectl version` users ask for it.

``hwagent --version`` says the same; a command of that name is what those users type first.
It imports nothing but the package's version string.
"""

from __future__ import annotations

from agent import __version__

#: typing is not imported at run time (~3 ms of the CLI's start-up); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("version", help="print hwagent's version (the same as --version)",
                              description="Print the version of this hwagent (the same as `hwagent --version`).")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(f"hwagent {__version__}")
    return 0
