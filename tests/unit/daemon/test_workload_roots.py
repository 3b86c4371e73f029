"""The runtime's cgroup subtree is a workload root for the CPU policy and eviction."""

from __future__ import annotations

from agent.config import loads
from agent.cgroups.config import workload_roots


def test_runtime_subtree_joins_the_configured_roots():
    cfg = loads('[runtime]\ncgroup_subtree = "/tenant-a.slice/"\n')
    assert workload_roots(cfg) == ("/hwagent.slice", "/kubepods", "/kubepods.slice", "/tenant-a.slice",
                                   "/tenant-a-reclaimed.slice")


def test_default_subtree_is_not_listed_twice_and_a_disabled_runtime_adds_nothing():
    assert workload_roots(loads("")) == ("/hwagent.slice", "/kubepods", "/kubepods.slice",
                                         "/hwagent-reclaimed.slice")
    cfg = loads('[runtime]\nenabled = false\ncgroup_subtree = "/elsewhere"\n')
    assert "/elsewhere" not in workload_roots(cfg) and "/elsewhere-reclaimed" not in workload_roots(cfg)
