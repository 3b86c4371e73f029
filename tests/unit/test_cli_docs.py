"""Manual pages and shell completion come from the parser, and stay in step with it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agent.commands.completion import bash_script, command_table, zsh_script
from agent.commands.manual import pages

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "commands"


def test_every_command_has_its_current_manual_page():
    want = pages()
    have = {p.name: p.read_text() for p in DOCS.glob("*.md")}
    stale = sorted(n for n in want if have.get(n) != want[n])
    extra = sorted(set(have) - set(want))
    assert not stale and not extra, (
        f"out of date: {stale}, no such command: {extra}; run: .venv/bin/python -m agent.commands.manual docs/commands"
    )


def test_completion_knows_every_command_and_flag():
    from agent.cli import build_parser

    table = command_table(build_parser())
    assert {"run", "topology", "install-unit", "completion"} <= set(table)
    assert "--root-dir" in table["run"] and "--version" in table[""]
    script = bash_script(table)
    for name in table:
        if name:
            assert f"        {name}) opts=" in script
    assert "complete -F _hwagent hwagent" in script
    assert zsh_script(table).startswith("#compdef hwagent")


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completion_completes_a_subcommand_and_its_flags():
    from agent.cli import build_parser

    script = bash_script(command_table(build_parser()))
    probe = script + '\nCOMP_WORDS=(hwagent ru); COMP_CWORD=1; _hwagent; echo "${COMPREPLY[@]}"\n'
    probe += 'COMP_WORDS=(hwagent run --root); COMP_CWORD=2; _hwagent; echo "${COMPREPLY[@]}"\n'
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30, check=True).stdout
    first, second = out.splitlines()
    assert first.split() == ["run"]
    assert second.split() == ["--root-dir"]
