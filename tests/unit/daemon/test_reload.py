"""plan_reload: live settings are taken, the rest reported as needing a restart and kept."""

from __future__ import annotations

import pytest

from agent.config import ConfigError, section_defaults
from agent.daemon.reload import DAEMON_LIVE_SETTINGS, plan_reload
from agent.pressure.engine import LIVE_SETTINGS


def test_live_changes_applied_restart_changes_kept_and_named() -> None:
    running = section_defaults()
    loaded = (running.replace("daemon", log_level="debug", root_dir="/elsewhere")
              .replace("pressure", soft_threshold=0.2, hard_threshold=0.4, max_cgroups=1024))
    plan = plan_reload(running, loaded, {"daemon": DAEMON_LIVE_SETTINGS, "pressure": LIVE_SETTINGS})
    assert set(plan.applied) == {"daemon.log_level", "pressure.soft_threshold", "pressure.hard_threshold"}
    assert set(plan.needs_restart) == {"daemon.root_dir", "pressure.max_cgroups"}
    eff = plan.effective
    assert eff.sections["daemon"].log_level == "debug" and eff.sections["daemon"].root_dir == running.sections["daemon"].root_dir
    assert (eff.sections["pressure"].soft_threshold, eff.sections["pressure"].hard_threshold) == (0.2, 0.4)
    assert eff.sections["pressure"].max_cgroups == running.sections["pressure"].max_cgroups
    assert set(plan.live_sections) == {"daemon", "pressure"}


def test_a_section_without_a_live_owner_needs_a_restart_for_everything() -> None:
    running = section_defaults()
    loaded = running.replace("cpu", reserved_cpus=running.sections["cpu"].reserved_cpus + 1)
    plan = plan_reload(running, loaded, {"daemon": DAEMON_LIVE_SETTINGS})
    assert plan.applied == () and plan.needs_restart == ("cpu.reserved_cpus",)
    assert plan.effective == running


def test_nothing_changed_is_a_no_op() -> None:
    running = section_defaults()
    plan = plan_reload(running, running, {"daemon": DAEMON_LIVE_SETTINGS})
    assert (plan.applied, plan.needs_restart, plan.effective) == ((), (), running)


def test_live_keys_that_disagree_with_kept_ones_refuse_the_reload() -> None:
    running = section_defaults().replace("pressure", interval_s=2.0, window_s=2.0)
    # window_s is live, but what if interval_s were not: simulate with a narrower live set
    loaded = running.replace("pressure", interval_s=0.5, window_s=1.0)
    with pytest.raises(ConfigError, match="window_s"):
        plan_reload(running, loaded, {"pressure": frozenset({"window_s"})})
