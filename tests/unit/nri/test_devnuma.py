"""The NUMA nodes of a container's device nodes, from a sysfs tree (/sys/dev/{char,block}/M:m)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.cpuset import CPUSet
from agent.nri.devnuma import device_numa_nodes
from agent.nri.placement import DeviceNodeHints
from agent.contracts.pods import ContainerSpec, PodSpec


def _dev(sys: Path, kind: str, mm: str, node: str | None) -> None:
    d = sys / "dev" / kind / mm / "device"
    d.mkdir(parents=True)
    if node is not None:
        (d / "numa_node").write_text(f"{node}\n")


def test_nodes_of_char_and_block_devices(tmp_path: Path) -> None:
    _dev(tmp_path, "char", "195:0", "1")  # a GPU's node on NUMA 1
    _dev(tmp_path, "block", "259:0", "0")  # an NVMe namespace on NUMA 0
    _dev(tmp_path, "char", "1:3", "-1")  # /dev/null: no node
    _dev(tmp_path, "char", "10:200", None)  # no numa_node file
    assert device_numa_nodes([("c", 195, 0)], tmp_path) == {1}
    assert device_numa_nodes([("c", 195, 0), ("b", 259, 0), ("c", 1, 3), ("c", 10, 200), ("c", 9, 9), ("p", 1, 1)],
                             tmp_path) == {0, 1}
    assert device_numa_nodes([], tmp_path) == frozenset()


def test_the_hint_the_topology_manager_gets() -> None:
    pod = PodSpec("p", "default", "u", (ContainerSpec("main", ("x",)),))
    assert asyncio.run(DeviceNodeHints(frozenset({1})).container_hints(pod, "main"))["devices"][0].affinity == {1}
    assert asyncio.run(DeviceNodeHints(frozenset()).container_hints(pod, "main")) == {}


def test_a_container_is_placed_on_the_node_of_its_device(tmp_path: Path) -> None:
    from agent.api.nri.v1alpha1 import api_pb2 as nri
    from agent.nri.placement import Placer
    from tests.unit.nri.test_placement import nri_container, on_node

    _dev(tmp_path, "char", "195:0", "1")

    async def body(node, placer: Placer) -> None:  # type: ignore[no-untyped-def]
        aligned = Placer(placer.tm, cpu_policy=placer.cpu_policy, sysfs_root=str(tmp_path))
        for uid in ("a", "b"):  # without the device the first would go to node 0
            pod, ctr = nri_container(uid, f"/kubepods/pod{uid}", shares=1024, quota=100_000)
            ctr.linux.devices.append(nri.LinuxDevice(path="/dev/nvidia0", type="c", major=195, minor=0))
            d = await aligned.create(pod, ctr)
            assert d.outcome == "adjusted" and d.mems == CPUSet({1}), d
            assert d.cpus is not None and all(node.machine.topology.cpu(c).numa_node == 1 for c in d.cpus)

    on_node(body)
