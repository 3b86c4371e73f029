"""The [pressure] config section."""

from __future__ import annotations

import pytest

from agent.config import ConfigError, loads


def test_pressure_config_section_is_strict():
    cfg = loads("[pressure]\nsoft_threshold = 0.4\nblockio = false\n").sections["pressure"]
    assert cfg.soft_threshold == 0.4 and "blockio" not in cfg.enabled_probes()
    with pytest.raises(ConfigError, match="soft_threshold"):
        loads("[pressure]\nsoft_threshold = 2.0\nhard_threshold = 1.0\n")
    with pytest.raises(ConfigError, match="runqlatt"):
        loads("[pressure]\nrunqlatt = false\n")
    with pytest.raises(ConfigError, match="cgroup_hierarchy"):
        loads("[pressure]\ncgroup_hierarchy = 'memory'\n")
