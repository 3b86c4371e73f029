"""The JSON document: stable top-level shape, exact round trip to the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from agent.topology.document import FORMAT, from_document, to_document
from agent.topology.model import Topology, synthetic
from agent.topology.sysfs import read_topology
from tests.unit.topology.fake_sysfs import FakeMachine

SHAPES = [
    synthetic(),
    synthetic(sockets=1, numa_per_socket=1, cores_per_numa=4, threads_per_core=1),
    synthetic(sockets=2, numa_per_socket=1, memory_only_nodes=2, sibling_numbering="adjacent", l3_per_numa=False),
]


def roundtrip(t: Topology) -> Topology:
    return from_document(json.loads(json.dumps(to_document(t))))


@pytest.mark.parametrize("topo", SHAPES, ids=["2s2n", "1s-nosmt", "memonly-adjacent"])
def test_synthetic_shapes_round_trip_exactly(topo: Topology) -> None:
    back = roundtrip(topo)
    assert back == topo
    # NUMANode.distances is excluded from dataclass equality; compare it explicitly
    assert [n.distances for n in back.numa_nodes] == [n.distances for n in topo.numa_nodes]


def test_read_tree_with_allowed_sets_and_warnings_round_trips(tmp_path: Path) -> None:
    m = FakeMachine(tmp_path, extra_nodes={3: 1024}).build()
    m.write("proc/self/status", "Cpus_allowed_list:\t0-3\nMems_allowed_list:\t0-1\n")
    m.remove("sys/devices/system/cpu/cpu*/topology/die_id")
    t = read_topology(str(m.sys), str(m.proc), self_cgroup=True)
    assert t.warnings and t.allowed_cpus is not None
    back = roundtrip(t)
    assert back == t and back.warnings == t.warnings and back.allowed_mems == CPUSet([0, 1])


def test_top_level_shape() -> None:
    doc = to_document(synthetic(memory_only_nodes=1))
    assert doc["format"] == FORMAT
    for key in ("packages", "cores", "cpus", "numa_nodes", "caches", "offline", "isolated", "warnings"):
        assert key in doc
    assert doc["cpus"] == "0-15"
    node = doc["numa_nodes"][0]
    assert set(node) >= {"id", "cpus", "memory_bytes", "distances"}
    assert node["distances"]["0"] == 10 and node["distances"]["1"] == 11
    assert doc["numa_nodes"][-1]["memory_only"] is True
    assert doc["packages"][1] == {
        "id": 1, "logical": 1, "cpus": "4-7,12-15", "cores": 4, "dies": [0], "numa_nodes": [2, 3],
    }
    assert doc["levels"] == ["package", "llc", "core", "pu"] and doc["groups"] == []
    # 2 sockets x 2 nodes + a memory-only node 4 (30 from everyone): 11 joins
    # each socket's pair, 21 the sockets; 30 would join all, which says nothing
    assert doc["numa_distance_groups"] == [
        {"distance": 11, "groups": ["0-1", "2-3", "4"]},
        {"distance": 21, "groups": ["0-3", "4"]},
    ]


def test_version_1_documents_are_still_read() -> None:
    doc = to_document(synthetic())
    doc["format"] = "hwagent-topology/1"
    for key in ("levels", "groups", "numa_distance_groups"):
        del doc[key]
    assert from_document(doc) == synthetic()


def test_other_format_is_refused() -> None:
    with pytest.raises(ValueError, match="not a hwagent-topology/1 or hwagent-topology/2 document"):
        from_document({"format": "something-else"})
