"""install-unit fits the shipped unit to the installation it runs from."""

from __future__ import annotations

from pathlib import Path

from agent.commands.install_unit import commented_defaults, render_unit
from agent.config import loads, section_defaults

REPO = Path(__file__).resolve().parents[3]
TEMPLATE = (REPO / "systemd" / "hwagent.service").read_text()


def _directive(unit: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith(f"{key}=")]


def test_exec_start_names_the_installation_and_its_config():
    unit = render_unit(TEMPLATE, Path("/opt/hwagent/bin/hwagent"), "/etc/hwagent/config.toml")
    (exec_start,) = _directive(unit, "ExecStart")
    assert exec_start == "/opt/hwagent/bin/hwagent run --config /etc/hwagent/config.toml $HWAGENT_ARGS"
    assert _directive(unit, "ProtectHome") == ["yes"] and _directive(unit, "PrivateTmp") == ["yes"]


def test_installation_under_a_home_dir_stays_visible():
    unit = render_unit(TEMPLATE, Path("/root/src/hwagent/.venv/bin/hwagent"), "/etc/hwagent/config.toml")
    assert _directive(unit, "ProtectHome") == ["read-only"]
    unit = render_unit(TEMPLATE, Path("/tmp/ci/clone/.venv/bin/hwagent"), "/etc/hwagent/config.toml")
    assert _directive(unit, "PrivateTmp") == ["no"] and _directive(unit, "ProtectHome") == ["yes"]


def test_commented_defaults_change_nothing():
    text = commented_defaults()
    assert loads(text).as_dict() == section_defaults().as_dict()
    # every setting is there to uncomment
    assert '# reclaim_min_cpus = "auto"' in text and "[cpu]" in text
