"""[cpu] reclaim_min_cpus: "auto" fits the machine the daemon starts on; a number is kept as written."""

from __future__ import annotations

import pytest

from agent.config import ConfigError, loads
from agent.cpu.component import options_from_config
from agent.cpu.config import CPU_SECTION, CPUConfig, reclaim_min_for


def test_the_embedded_default_is_auto():
    assert loads("")[CPU_SECTION].reclaim_min_cpus == "auto"


@pytest.mark.parametrize(
    ("online", "reserved", "want"),
    [(2, 0, 2), (1, 0, 1), (4, 0, 4), (64, 0, 4), (2, 1, 1), (8, 2, 4), (5, 2, 3)],
)
def test_auto_is_four_or_the_unreserved_online_cpus(online, reserved, want):
    cfg = CPUConfig(reserved_cpus=reserved)
    assert reclaim_min_for(cfg, online) == want


def test_auto_counts_an_explicit_reserved_list():
    assert reclaim_min_for(CPUConfig(reserved_cpu_list="0-2"), 4) == 1
    # the list wins over the count, as it does for the reserved set itself
    assert reclaim_min_for(CPUConfig(reserved_cpus=3, reserved_cpu_list="0"), 4) == 3


def test_auto_never_goes_below_zero_when_everything_is_reserved():
    # the start-up check names that config; the minimum itself stays a valid count
    assert reclaim_min_for(CPUConfig(reserved_cpus=4), 2) == 0


def test_an_explicit_number_is_kept_even_above_the_machine():
    assert reclaim_min_for(CPUConfig(reclaim_min_cpus=8), 2) == 8
    assert reclaim_min_for(CPUConfig(reclaim_min_cpus=0), 64) == 0


def test_policy_options_carry_the_resolved_minimum():
    assert options_from_config(CPUConfig(), online=2).reclaim_min == 2
    assert options_from_config(CPUConfig(), online=96).reclaim_min == 4
    assert options_from_config(CPUConfig(reclaim_min_cpus=6), online=2).reclaim_min == 6


@pytest.mark.parametrize("text", ['"auto"', "0", "12"])
def test_config_file_accepts_auto_and_counts(text):
    loads(f"[cpu]\nreclaim_min_cpus = {text}\n")


@pytest.mark.parametrize(("text", "said"), [('"four"', "auto"), ("-1", ">= 0"), ("true", "auto")])
def test_config_file_refuses_other_values_and_says_what_fits(text, said):
    with pytest.raises(ConfigError) as e:
        loads(f"[cpu]\nreclaim_min_cpus = {text}\n")
    assert "reclaim_min_cpus" in str(e.value) and said in str(e.value), str(e.value)
