"""[cpu] dedicated_numa: "auto" is exclusive-cores standalone and Katalyst's
whole-node rule in kubelet mode (a QRM kubelet expects its pools); an explicit
value wins in either mode."""

from __future__ import annotations

import pytest

from agent.config import ConfigError, loads
from agent.cpu.component import options_from_config
from agent.cpu.config import CPU_SECTION, CPUConfig


def test_the_embedded_default_is_auto():
    assert loads("")[CPU_SECTION].dedicated_numa == "auto"


@pytest.mark.parametrize(("mode", "want"), [("standalone", "exclusive-cores"), ("kubelet", "whole-node")])
def test_auto_follows_the_mode(mode, want):
    assert options_from_config(CPUConfig(), online=2, mode=mode).dedicated_numa == want


@pytest.mark.parametrize("mode", ["standalone", "kubelet"])
@pytest.mark.parametrize("value", ["exclusive-cores", "whole-node"])
def test_an_explicit_value_wins(mode, value):
    cfg = loads(f'[cpu]\ndedicated_numa = "{value}"\n')[CPU_SECTION]
    assert options_from_config(cfg, online=2, mode=mode).dedicated_numa == value


def test_config_file_refuses_other_values_and_names_them():
    with pytest.raises(ConfigError) as e:
        loads('[cpu]\ndedicated_numa = "whole_node"\n')
    msg = str(e.value)
    assert "dedicated_numa" in msg and "exclusive-cores" in msg and "whole-node" in msg, msg
