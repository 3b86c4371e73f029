"""[cgroups]: every cgroup location in one section, the old spellings still loading."""

from __future__ import annotations

import logging

import pytest

from agent.cgroups.config import CgroupsConfig, workload_roots
from agent.config import ConfigError, loads, section_defaults

OLD_SPELLINGS = [
    ("daemon", "cgroup_root", '"/srv/cg"', "root", "/srv/cg"),
    ("daemon", "workload_cgroup_roots", '["/tenant.slice"]', "workload_roots", ("/tenant.slice",)),
    ("runtime", "cgroup_subtree", '"/jobs.slice"', "runtime_subtree", "/jobs.slice"),
    ("pressure", "cgroup_hierarchy", '"cpuset"', "hierarchy", "cpuset"),
    ("kubelet", "cgroup_root", '"/host"', "kubelet_cgroup_root", "/host"),
    ("cpu", "reclaim_cgroup", '"/kubepods/besteffort"', "reclaim_cgroup", "/kubepods/besteffort"),
]


def test_defaults_are_the_old_sections_defaults() -> None:
    cg = section_defaults().sections["cgroups"]
    assert cg == CgroupsConfig()
    assert (cg.root, cg.runtime_subtree, cg.hierarchy, cg.kubelet_cgroup_root) == (
        "/sys/fs/cgroup", "/hwagent.slice", "auto", "/")
    assert cg.workload_roots == ("/hwagent.slice", "/kubepods", "/kubepods.slice")


@pytest.mark.parametrize("section, key, toml, new, value", OLD_SPELLINGS)
def test_an_old_key_loads_into_cgroups_with_one_warning_naming_the_new_key(
    caplog: pytest.LogCaptureFixture, section: str, key: str, toml: str, new: str, value: object
) -> None:
    with caplog.at_level(logging.WARNING, logger="hwagent.config"):
        cfg = loads(f"[{section}]\n{key} = {toml}\n")
    assert getattr(cfg.sections["cgroups"], new) == value
    assert not hasattr(cfg.sections[section], key)
    warnings = [r for r in caplog.records if r.name == "hwagent.config"]
    assert len(warnings) == 1 and warnings[0].getMessage() == "config key deprecated"
    assert warnings[0].fields["key"] == f"{section}.{key}" and warnings[0].fields["use"] == f"cgroups.{new}"


def test_the_new_key_loads_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hwagent.config"):
        cfg = loads('[cgroups]\nroot = "/srv/cg"\nhierarchy = "v2"\n')
    assert (cfg.sections["cgroups"].root, cfg.sections["cgroups"].hierarchy) == ("/srv/cg", "v2")
    assert not [r for r in caplog.records if r.name == "hwagent.config"]


def test_old_and_new_spelling_must_agree() -> None:
    same = loads('[daemon]\ncgroup_root = "/a"\n[cgroups]\nroot = "/a"\n')
    assert same.sections["cgroups"].root == "/a"
    with pytest.raises(ConfigError, match=r"daemon\.cgroup_root is the old spelling of cgroups\.root"):
        loads('[daemon]\ncgroup_root = "/a"\n[cgroups]\nroot = "/b"\n')


def test_a_bad_old_value_is_reported_under_the_key_written() -> None:
    with pytest.raises(ConfigError, match=r"pressure\.cgroup_hierarchy \(now cgroups\.hierarchy\): must be one of"):
        loads("[pressure]\ncgroup_hierarchy = 'memory'\n")
    with pytest.raises(ConfigError, match="cgroups.root: must be an absolute path"):
        loads('[daemon]\ncgroup_root = "relative"\n')
    with pytest.raises(ConfigError, match="cgroups.reclaim_cgroup: must start with '/'"):
        loads('[cpu]\nreclaim_cgroup = "besteffort"\n')
    with pytest.raises(ConfigError, match="cgroups.workload_roots"):
        loads('[cgroups]\nworkload_roots = ["/"]\n')


def test_an_override_with_the_old_key_lands_in_cgroups() -> None:
    cfg = section_defaults().replace("daemon", cgroup_root="/x", log_level="debug")
    assert cfg.sections["cgroups"].root == "/x" and cfg.sections["daemon"].log_level == "debug"
    with pytest.raises(ConfigError):
        section_defaults().replace("runtime", cgroup_subtree=5)


def test_workload_roots_add_the_runtime_subtree_once() -> None:
    cfg = loads('[cgroups]\nruntime_subtree = "/jobs.slice/"\nworkload_roots = ["/kubepods"]\n')
    assert workload_roots(cfg) == ("/kubepods", "/jobs.slice", "/jobs-reclaimed.slice")
    assert workload_roots(loads('[runtime]\nenabled = false\n[cgroups]\nruntime_subtree = "/x"\n')) == (
        "/hwagent.slice", "/kubepods", "/kubepods.slice")


def test_the_reclaimed_subtree_defaults_to_a_sibling_of_the_runtime_subtree() -> None:
    """Unset: derived from runtime_subtree, so a config that moves the runtime (every test's
    own subtree) moves its reclaimed pods too and never makes the real /hwagent-reclaimed.slice."""
    assert CgroupsConfig().reclaimed_subtree() == "/hwagent-reclaimed.slice"
    assert CgroupsConfig(runtime_subtree="/hwagent-test-1-ab").reclaimed_subtree() == "/hwagent-test-1-ab-reclaimed"
    assert CgroupsConfig(runtime_subtree="/t/pods/").reclaimed_subtree() == "/t/pods-reclaimed"
    assert loads('[runtime]\ncgroup_subtree = "/x.slice"\n').sections["cgroups"].reclaimed_subtree() == (
        "/x-reclaimed.slice")
    cfg = loads('[cgroups]\nruntime_reclaimed_subtree = "/idle.slice/"\n')
    assert cfg.sections["cgroups"].reclaimed_subtree() == "/idle.slice"
    assert loads('[cgroups]\nruntime_reclaimed_subtree = ""\n').sections["cgroups"].reclaimed_subtree() == ""


@pytest.mark.parametrize("value, why", [
    ("idle.slice", "must be an absolute path"),
    ("/", "cannot be the cgroup root"),
    ("/hwagent.slice/idle", "overlaps runtime_subtree"),
    ("/hwagent.slice", "overlaps runtime_subtree"),
])
def test_a_bad_reclaimed_subtree_is_refused(value: str, why: str) -> None:
    with pytest.raises(ConfigError, match=f"cgroups.runtime_reclaimed_subtree: .*{why}"):
        loads(f'[cgroups]\nruntime_reclaimed_subtree = "{value}"\n')
    with pytest.raises(ConfigError, match="overlaps runtime_subtree"):
        loads('[cgroups]\nruntime_subtree = "/a/b"\nruntime_reclaimed_subtree = "/a"\n')


def test_workload_roots_add_the_reclaimed_subtree() -> None:
    """Reclaimed pods' cgroups are workload cgroups: the CPU enforcer binds them, the pressure
    engine maps and evicts them."""
    cfg = loads('[cgroups]\nruntime_subtree = "/jobs.slice"\nworkload_roots = ["/kubepods"]\n')
    assert workload_roots(cfg) == ("/kubepods", "/jobs.slice", "/jobs-reclaimed.slice")
    off = loads('[cgroups]\nruntime_subtree = "/jobs.slice"\nruntime_reclaimed_subtree = ""\n'
                'workload_roots = ["/kubepods"]\n')
    assert workload_roots(off) == ("/kubepods", "/jobs.slice")
