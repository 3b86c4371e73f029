"""The one ``--format`` option every printing command shares.

Commands used to differ (``--json`` here, ``--format json`` there); now each
calls ``add_format_option`` with the formats it can print, and a command that
had ``--json`` keeps it as an alias of ``--format json``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

__all__ = ["FORMATS", "add_format_option"]

#: every format some command prints; a command offers the subset it supports
FORMATS = ("text", "json", "svg", "png", "resourceslice")


def add_format_option(
    parser: argparse.ArgumentParser,
    choices: Sequence[str] = ("text", "json"),
    *,
    default: str = "text",
    json_alias: bool = False,
) -> None:
    """Add ``--format {choices}`` (and ``--json`` when the command had it)."""
    unknown = [c for c in choices if c not in FORMATS]
    if unknown or default not in choices:
        raise ValueError(f"unknown output format(s) {unknown or [default]}; known: {', '.join(FORMATS)}")
    parser.add_argument(
        "--format",
        choices=tuple(choices),
        default=default,
        help=f"output format: {', '.join(choices)} (default {default})",
    )
    if json_alias:
        parser.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
