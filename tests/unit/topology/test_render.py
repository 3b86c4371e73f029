"""The human-readable tree."""

from __future__ import annotations

import dataclasses
import re

import pytest

from agent.cpuset import CPUSet
from agent.topology.model import synthetic
from agent.topology.render import MAX_MATRIX_NODES, human_bytes, render_text


@pytest.mark.parametrize(
    ("n", "text"),
    [(None, "unknown"), (0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (32 << 20, "32 MiB"), (8416088064, "7.8 GiB")],
)
def test_human_bytes(n, text) -> None:
    assert human_bytes(n) == text


def test_tree_shows_every_cpu_once_under_its_package_and_l3() -> None:
    t = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)
    text = render_text(t)
    assert text.splitlines()[0] == "16 CPUs online (0-15), 2 packages, 8 cores, 2 threads/core, 4 NUMA nodes, 32 GiB memory"
    assert "package 1: 4 cores, cpus 4-7,12-15  (NUMA nodes 2-3)" in text
    core_lines = [line for line in text.splitlines() if re.search(r"core \d+: cpus", line)]
    listed = [CPUSet.parse(line.split("cpus ")[1].split()[0]) for line in core_lines]
    assert sorted(c for s in listed for c in s) == list(range(16))
    # cores sit under their L3 group: the L3 line comes before its cores, one per NUMA node
    assert text.count("L3 32 MiB") == 4
    assert "die " not in text  # one die per package: the level is left out


def test_numa_memory_distances_and_warnings() -> None:
    t = dataclasses.replace(synthetic(sockets=2, numa_per_socket=1, memory_only_nodes=1), warnings=("odd thing",))
    text = render_text(t)
    assert "  node 0: 8 GiB, cpus 0-1,4-5" in text
    assert "  node 2: 8 GiB, memory only" in text
    matrix = text.split("Distances:\n")[1].splitlines()
    assert matrix[0].split() == ["0", "1", "2"]
    assert matrix[2].split() == ["1", "21", "10", "30"]
    assert text.rstrip().endswith("Warnings (1):\n  - odd thing")


def test_many_nodes_summarise_distances() -> None:
    t = synthetic(sockets=MAX_MATRIX_NODES + 1, numa_per_socket=1, cores_per_numa=1, threads_per_core=1)
    text = render_text(t)
    assert f"Distances: {MAX_MATRIX_NODES + 1} nodes, values 10, 21 (matrix in --format json)" in text


def test_multi_die_packages_show_the_die_level() -> None:
    base = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=2, threads_per_core=1)
    cpus = tuple(dataclasses.replace(c, die_id=c.numa_node or 0) for c in base.cpus)
    text = render_text(dataclasses.replace(base, cpus=cpus))
    assert "├─ die 0" in text and "└─ die 1" in text


def test_isolated_and_disallowed_cpus_are_marked() -> None:
    t = dataclasses.replace(
        synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2, threads_per_core=1),
        isolated=CPUSet([1]),
        allowed_cpus=CPUSet([1]),
    )
    text = render_text(t)
    assert "core 0: cpu 0  [not allowed 0]" in text
    assert "core 1: cpu 1  [isolated 1]" in text
    assert "this process may use cpus 1" in text


def test_kernel_package_ids_in_brackets_after_the_logical_number() -> None:
    from dataclasses import replace

    t = synthetic(sockets=2, numa_per_socket=1)
    t = replace(t, cpus=tuple(replace(c, package_id={0: 512, 1: 1024}[c.package_id]) for c in t.cpus))
    text = render_text(t)
    assert "package 0 [512]: 2 cores" in text and "package 1 [1024]: 2 cores" in text


def test_numa_nodes_are_grouped_by_distance() -> None:
    text = render_text(synthetic(sockets=2, numa_per_socket=2))
    assert "  within 11: [0-1]  [2-3]" in text


def test_no_cluster_sentinel_is_never_printed() -> None:
    from dataclasses import replace

    t = synthetic()
    t = replace(t, cpus=tuple(replace(c, cluster_id=None) for c in t.cpus))
    assert "cluster" not in render_text(t)
