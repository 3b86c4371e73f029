"""docs/config.md documents every section's defaults, and they are the code's defaults."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

from agent.config import SECTIONS, dumps, section_defaults

DOC = Path(__file__).resolve().parents[3] / "docs" / "config.md"

_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


def documented_blocks() -> dict[str, tuple[dict, str]]:
    """section name -> (parsed TOML of its block, the block's raw text)."""
    out: dict[str, tuple[dict, str]] = {}
    for raw in _BLOCK.findall(DOC.read_text()):
        data = tomllib.loads(raw)
        for name, table in data.items():
            assert name not in out, f"docs/config.md documents [{name}] twice"
            out[name] = (table, raw)
    return out


def test_every_registered_section_is_documented():
    missing = sorted(set(SECTIONS) - set(documented_blocks()))
    assert not missing, f"add a ```toml block for {missing} to docs/config.md (see 'Adding a section')"


def test_documented_sections_exist():
    extra = sorted(set(documented_blocks()) - set(SECTIONS))
    assert not extra, f"docs/config.md documents sections the code does not have: {extra}"


def test_documented_defaults_equal_the_dataclass_defaults():
    # the code's defaults, spelled the way a TOML file would spell them
    code = tomllib.loads(dumps(section_defaults()))
    for name, (doc_table, raw) in documented_blocks().items():
        section = section_defaults().sections[name]
        assert doc_table == code.get(name, {}), f"[{name}] in docs/config.md differs from {SECTIONS[name]}"
        # keys without a TOML default (None) must still be named, as a comment
        for f in dataclasses.fields(section):
            if getattr(section, f.name) is None:
                assert re.search(rf"^#\s*{f.name}\s*=", raw, re.M), f"[{name}] {f.name} undocumented"


def test_the_check_catches_a_wrong_default():
    # guard against this test passing vacuously: a doc that lies must not compare equal
    code = tomllib.loads(dumps(section_defaults()))
    doc_table, _ = documented_blocks()["daemon"]
    lied = dict(doc_table, metrics_address="0.0.0.0:1")
    assert lied != code["daemon"]
    assert set(doc_table) == {f.name for f in dataclasses.fields(section_defaults().sections["daemon"])}
