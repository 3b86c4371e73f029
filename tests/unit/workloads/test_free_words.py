"""What is free, as a person reads it (issue 37 item 2): ``node 0: 1 CPU, 23.5 GiB memory,
0 × 2 MiB pages`` instead of ``cpu 0=1; memory 0=24683772Ki; hugepages-2Mi 0=0``, which
read as "CPU 0 = 1" and made the reader convert kibibytes."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent.memory.policy import Capacity
from agent.memory.words import human_bytes, memory_phrase
from agent.workloads.errors import AdmissionError
from agent.workloads.freetext import NodeFree, count_phrase, free_line
from tests.unit.workloads.admission_node import MACHINES, Node

MB, GB = 1 << 20, 1 << 30


@pytest.mark.parametrize("n,words", [
    (0, "0 B"), (512, "512 B"), (1024, "1 KiB"), (2 * MB, "2 MiB"), (1536 * MB, "1.5 GiB"),
    (24683772 * 1024, "23.5 GiB"), (GB - 1, "1023.9 MiB"), (3 << 40, "3 TiB"),
])
def test_bytes_in_the_largest_unit_they_reach_never_overstated(n: int, words: str) -> None:
    assert human_bytes(n) == words


def test_pages_are_counted_in_pages_of_their_size_and_memory_in_bytes() -> None:
    assert memory_phrase("hugepages-2Mi", 0) == "0 × 2 MiB pages"
    assert memory_phrase("hugepages-2Mi", 2 * MB) == "1 × 2 MiB page"
    assert memory_phrase("hugepages-1Gi", 3 * GB) == "3 × 1 GiB pages"
    assert memory_phrase("memory", 24683772 * 1024) == "23.5 GiB memory"


def test_counts_take_their_noun_and_resource_names_stay_as_they_are() -> None:
    assert [count_phrase(n, "CPU") for n in (0, 1, 2)] == ["0 CPUs", "1 CPU", "2 CPUs"]
    assert count_phrase(2, "example.com/gpu") == "2 example.com/gpu"


def test_one_node_reads_as_a_sentence() -> None:
    line = free_line({0: NodeFree(1, {"memory": 24683772 * 1024, "hugepages-2Mi": 0})})
    assert line == "free per NUMA node: node 0: 1 CPU, 23.5 GiB memory, 0 × 2 MiB pages"


def test_nodes_devices_unaligned_devices_and_a_note_on_the_cpus() -> None:
    line = free_line({1: NodeFree(4, {}, {"example.com/dev": 2}), 0: NodeFree(0, {}, {"example.com/dev": 0})},
                     {"example.com/dev": 1}, cpus_note="the CPUs are free for dedicated pods only")
    assert line == ("free per NUMA node (the CPUs are free for dedicated pods only): node 0: 0 CPUs, "
                    "0 example.com/dev; node 1: 4 CPUs, 2 example.com/dev; on no NUMA node: 1 example.com/dev")
    assert free_line({}) == "free per NUMA node: unknown"


def test_an_admission_refusal_for_pages_names_each_node_once_in_words(tmp_path) -> None:
    cap = {n: {"memory": Capacity(2 * GB, 0, 2 * GB), "hugepages-2Mi": Capacity(128 * MB, 0, 128 * MB, 2 * MB)}
           for n in (0, 1)}
    limits = {"cpu": "1", "memory": "512Mi", "hugepages-2Mi": "192Mi"}
    manifest = json.dumps({"metadata": {"name": "big", "annotations": {
        "katalyst.kubewharf.io/qos_level": "dedicated_cores",
        "katalyst.kubewharf.io/memory_enhancement": '{"numa_binding": "true"}'}},
        "spec": {"containers": [{"name": "c", "command": ["true"], "resources": {"limits": limits}}]}})

    async def main() -> str:
        node = await Node(tmp_path, MACHINES[0], "single-numa-node", "container", memory_capacity=cap).start()
        try:
            with pytest.raises(AdmissionError) as e:
                await node.workloads.admit_manifest(manifest)
            return e.value.message
        finally:
            await node.stop()

    msg = asyncio.run(main())
    assert msg.count("free per") == 1, msg  # the memory manager's own summary is not repeated
    assert msg.endswith("free per NUMA node: node 0: 4 CPUs, 2 GiB memory, 64 × 2 MiB pages; "
                        "node 1: 4 CPUs, 2 GiB memory, 64 × 2 MiB pages"), msg
