"""Config values that cannot apply on a machine are named at start-up."""

from __future__ import annotations

from agent.config import loads
from agent.daemon.checks import config_warnings
from agent.topology.model import synthetic


def test_reclaim_minimum_above_cpu_count_warns():
    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2, threads_per_core=1)
    cfg = loads("[cpu]\nreclaim_min_cpus = 8\n")
    (w,) = config_warnings(cfg, topo, cgroup_root_exists=True)
    assert "reclaim_min_cpus = 8" in w and "2 online CPUs" in w


def test_defaults_on_a_big_machine_warn_nothing():
    topo = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=8, threads_per_core=2)
    assert config_warnings(loads(""), topo, cgroup_root_exists=True) == []


def test_reserving_every_cpu_and_a_missing_cgroup_root_warn():
    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=4, threads_per_core=1)
    cfg = loads('[cpu]\nreserved_cpus = 3\nreclaim_min_cpus = 0\n[daemon]\ncgroup_root = "/nonexistent/cg"\n')
    assert config_warnings(cfg, topo, cgroup_root_exists=True) == []
    cfg = loads('[cpu]\nreserved_cpus = 4\nreclaim_min_cpus = 0\n[daemon]\ncgroup_root = "/nonexistent/cg"\n')
    warnings = config_warnings(cfg, topo)
    assert len(warnings) == 2
    assert any("reserved_cpus = 4" in w for w in warnings)
    assert any("/nonexistent/cg" in w for w in warnings)


def test_defaults_on_a_two_cpu_machine_warn_nothing():
    # "auto" resolves to the CPUs there are; only an explicit minimum above them is named
    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2, threads_per_core=1)
    assert config_warnings(loads(""), topo, cgroup_root_exists=True) == []
    one = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=1, threads_per_core=1)
    assert config_warnings(loads(""), one, cgroup_root_exists=True) == []
