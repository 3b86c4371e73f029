"""The topology manager on real machines' NUMA layouts (hwloc sysfs snapshots):
this VM has one NUMA node, so multi-node behaviour is shown on fixture trees."""

from __future__ import annotations

import pytest

from agent.config import ConfigError, loads
from agent.topology.sysfs import read_topology
from agent.topologymanager import TopologyManager, TopologyManagerConfig
from agent.contracts.hints import TopologyHint


def H(*nodes: int, preferred: bool = True) -> TopologyHint:
    return TopologyHint(frozenset(nodes), preferred)


def topology(hwloc_extract, name):
    d = hwloc_extract(name)
    return read_topology(str(d / "sys"), str(d / "proc"))


def test_prefer_closest_uses_the_machines_distance_matrix(hwloc_extract):
    # 16ia64-8n2s: two groups of four nodes, 25 within a group, 29 across
    topo = topology(hwloc_extract, "16ia64-8n2s")
    assert topo.distance(3, 4) == 29 and topo.distance(4, 5) == 25
    hints = [{"cpu": [H(3, 4), H(4, 5)]}, {"memory": [H(3, 4), H(4, 5)]}]
    closest = TopologyManager.for_topology(
        TopologyManagerConfig(policy="restricted", prefer_closest_numa_nodes=True), topo)
    plain = TopologyManager.for_topology(TopologyManagerConfig(policy="restricted"), topo)
    assert closest.merge(hints).hint == H(4, 5)
    assert plain.merge(hints).hint == H(3, 4)  # lower node numbers win without the option


def test_more_than_eight_nodes_is_refused_unless_the_limit_is_raised(hwloc_extract):
    topo = topology(hwloc_extract, "128ia64-17n4s2c")
    assert len(topo.numa_nodes) == 17
    with pytest.raises(ValueError, match="more than 8 NUMA nodes .this one has 17."):
        TopologyManager.for_topology(TopologyManagerConfig(policy="single-numa-node"), topo)
    TopologyManager.for_topology(TopologyManagerConfig(policy="none"), topo)
    tm = TopologyManager.for_topology(
        TopologyManagerConfig(policy="single-numa-node", max_allowable_numa_nodes=17), topo)
    assert tm.merge([{"cpu": [H(16), H(0, 16, preferred=False)]}]).hint == H(16)


def test_the_config_section_builds_a_manager():
    cfg = loads('[topology_manager]\npolicy = "single-numa-node"\nscope = "pod"\n').sections["topology_manager"]
    tm = TopologyManager(cfg, [0, 1])
    assert (tm.policy, tm.scope) == ("single-numa-node", "pod")
    with pytest.raises(ConfigError, match=r"topology_manager.scope: must be one of container, pod, got 'node'"):
        loads('[topology_manager]\nscope = "node"\n')
    with pytest.raises(ConfigError, match="topology_manager.max_allowable_numa_nodes: must be at least 8"):
        loads("[topology_manager]\nmax_allowable_numa_nodes = 2\n")
    with pytest.raises(ConfigError, match="prefer_closest_numa_nodes: expected true or false"):
        loads('[topology_manager]\nprefer_closest_numa_nodes = "yes"\n')
