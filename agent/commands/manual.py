"""Manual pages for every `hwagent` subcommand, rendered from the parser.

``docs/commands/<name>.md`` is written from the same argparse tree that parses
the command line (``python -m agent.commands.manual docs/commands``), and a test
renders it again and compares, so a flag added to a command cannot be missing
from its page. Each page is the command's description and its full usage and
options, in the order ``--help`` shows them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["pages", "write_pages"]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def pages() -> dict[str, str]:
    """file name -> markdown, one per subcommand plus an index."""
    from agent.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal width; pages must not depend on it
    root = build_parser()
    subs = _subparsers(root)
    helps = {}
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
    out: dict[str, str] = {}
    index = ["# hwagent commands", "", "Generated from the command line parser "
             "(`python -m agent.commands.manual docs/commands`); `hwagent COMMAND --help` prints the same.", "",
             "The daemon's options `--root-dir DIR` and `--config FILE` may also come before the command "
             "(`hwagent --root-dir /srv/hw ps`, as `docker -H` or `kubectl --kubeconfig`); a wrong flag is "
             "answered with that command's usage. `hwagent ps -aq`, `rm -f`, `stop -t S`, `exec -it`, "
             "`launch -d -m SIZE` and `hwagent version` read as docker users expect.", "",
             "| command | what |", "|---|---|"]
    for name, sub in subs.items():
        index.append(f"| [`hwagent {name}`]({name}.md) | {helps.get(name, '')} |")
        sub.prog = f"hwagent {name}"
        text = sub.format_help().rstrip()
        out[f"{name}.md"] = "\n".join([
            f"# hwagent {name}", "", helps.get(name, "").rstrip(".") + ".", "",
            "```text", text, "```", "",
        ])
    from agent.commands._exitcodes import EXIT_CODES

    index += ["", "## Exit status", "", "Every command that talks to the daemon answers with one of these "
              "(`agent/commands/_exitcodes.py`); the message on stderr says what happened and what to type next.",
              "", "| status | meaning |", "|---|---|"]
    index += [f"| {code} | {meaning} |" for code, meaning in EXIT_CODES]
    out["README.md"] = "\n".join(index) + "\n"
    return out


def write_pages(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in pages().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    for stale in directory.glob("*.md"):
        if stale not in written:
            stale.unlink()
    return written


if __name__ == "__main__":
    for p in write_pages(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/commands")):
        print(p)
