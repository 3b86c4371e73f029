"""Admission with the memory manager on a 2-node fixture machine: CPUs, memory and
pages aligned on one node by the topology manager, cpuset.mems from the memory
affinity, refusals naming per-node free amounts and changing nothing, release on
removal, the dry run equal to the admission, and the state back after a restart."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent.memory.policy import Capacity
from agent.workloads.errors import AdmissionError
from tests.unit.workloads.admission_node import MACHINES, Node

M2 = MACHINES[0]  # 2 NUMA nodes x 4 cpus
MB = 1 << 20
GB = 1 << 30
CAPACITY = {n: {"memory": Capacity(2 * GB, 0, 2 * GB), "hugepages-2Mi": Capacity(128 * MB, 0, 128 * MB, 2 * MB)}
            for n in (0, 1)}


def pod(name: str, *, cpus: int = 2, memory: str | None = "512Mi", pages: str | None = "64Mi",
        qos: str = "dedicated_cores", request_only: bool = False, annotations: dict[str, str] | None = None) -> str:
    ann = {"katalyst.kubewharf.io/qos_level": qos, **(annotations or {})}
    if qos == "dedicated_cores":
        ann["katalyst.kubewharf.io/memory_enhancement"] = '{"numa_binding": "true"}'
    limits: dict[str, Any] = {"cpu": str(cpus)}
    if memory:
        limits["memory"] = memory
    if pages:
        limits["hugepages-2Mi"] = pages
    res: dict[str, Any] = {"limits": limits}
    if request_only:
        res = {"requests": dict(limits), "limits": {k: v for k, v in limits.items() if k != "memory"}}
    return json.dumps({"metadata": {"name": name, "annotations": ann},
                       "spec": {"containers": [{"name": "c", "command": ["sleep", "1"], "resources": res}]}})


def run(tmp_path, body, policy: str = "single-numa-node") -> None:
    async def main() -> None:
        node = await Node(tmp_path, M2, policy, "container", memory_capacity=CAPACITY).start()
        try:
            await body(node)
        finally:
            await node.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def snapshot(node: Node) -> Any:
    return (node.memory.nodes(), dict(node.memory.all_blocks()), node.workloads.cpu_policy.allocations())


def test_cpus_memory_and_pages_on_one_node(tmp_path) -> None:
    async def body(node: Node) -> None:
        w = node.workloads
        # 96Mi of the 128Mi pages per node: the second pod must go to the other node, CPUs with it
        a = (await w.admit_manifest(pod("p1", pages="96Mi"))).pod
        b = (await w.admit_manifest(pod("p2", pages="96Mi"))).pod
        for p in (a, b):
            ca = p.assignments["c"]
            (numa,) = ca.numa_affinity
            blocks = node.memory.blocks(p.uid, "c")
            assert {(x.resource, x.size, x.numa_nodes) for x in blocks} == {
                ("memory", 512 * MB, (numa,)), ("hugepages-2Mi", 96 * MB, (numa,))}
            assert set(ca.mems) == {numa}
            assert {node.workloads.cpu_policy.numa_of()[c] for c in ca.cpus} == {numa}
        assert a.assignments["c"].numa_affinity != b.assignments["c"].numa_affinity

    run(tmp_path, body)


def test_a_refusal_names_free_per_node_and_changes_nothing(tmp_path) -> None:
    async def body(node: Node) -> None:
        w = node.workloads
        await w.admit_manifest(pod("p1", cpus=1, pages="128Mi"))
        before = snapshot(node)
        dry = await w.admit_manifest(pod("big", cpus=1, pages="192Mi"), dry_run=True)
        assert not dry.would_admit
        with pytest.raises(AdmissionError) as e:
            await w.admit_manifest(pod("big", cpus=1, pages="192Mi"))
        assert e.value.code == "RESOURCE_EXHAUSTED"
        assert "hugepages-2Mi" in e.value.message and "node 0: 3 CPUs, 1.5 GiB memory, 0 × 2 MiB pages; " \
            "node 1: 4 CPUs, 2 GiB memory, 64 × 2 MiB pages" in e.value.message
        assert e.value.message.startswith(dry.reason)
        assert snapshot(node) == before and len(w.registry) == 1

    run(tmp_path, body)


@pytest.mark.parametrize("manifest,words", [
    (pod("no-limit", request_only=True), "without a limit"),
    (pod("odd", pages="3Mi"), "whole number of 2Mi pages"),
])
def test_bad_memory_requests_are_invalid(tmp_path, manifest: str, words: str) -> None:
    async def body(node: Node) -> None:
        before = snapshot(node)
        with pytest.raises(AdmissionError) as e:
            await node.workloads.admit_manifest(manifest)
        assert e.value.code == "INVALID_ARGUMENT" and words in e.value.message
        assert snapshot(node) == before

    run(tmp_path, body)


def test_unknown_page_size_is_refused(tmp_path) -> None:
    manifest = json.loads(pod("gig", pages=None))
    manifest["spec"]["containers"][0]["resources"]["limits"]["hugepages-1Gi"] = "1Gi"

    async def body(node: Node) -> None:
        with pytest.raises(AdmissionError) as e:
            await node.workloads.admit_manifest(json.dumps(manifest))
        assert "hugepages-1Gi" in e.value.message and "page sizes: hugepages-2Mi" in e.value.message

    run(tmp_path, body)


def test_removal_releases_and_a_restart_keeps_the_rest(tmp_path) -> None:
    async def body(node: Node) -> None:
        w = node.workloads
        await w.admit_manifest(pod("p1"))
        keep = (await w.admit_manifest(pod("p2"))).pod
        await w.remove("p1")
        for _ in range(200):
            if len(node.memory.all_blocks()) == 1:
                break
            await asyncio.sleep(0.01)
        assert set(node.memory.all_blocks()) == {(keep.uid, "c")}
        before = node.memory.nodes()
        await node.restart()
        assert node.memory.nodes() == before
        assert set(node.memory.all_blocks()) == {(keep.uid, "c")}

    run(tmp_path, body)


def test_shared_pod_with_hugepages_is_placed_and_spread_on_request(tmp_path) -> None:
    async def body(node: Node) -> None:
        w = node.workloads
        p = (await w.admit_manifest(pod("s", qos="shared_cores", cpus=1, memory=None, pages="8Mi",
                                        annotations={"hwagent.io/hugepages-spread": "true"}))).pod
        (b,) = node.memory.blocks(p.uid, "c")
        assert b.per_node == ((0, 4 * MB), (1, 4 * MB))
        plain = json.loads(pod("d", qos="shared_cores", cpus=1, pages=None))
        q = (await w.admit_manifest(json.dumps(plain))).pod
        assert node.memory.blocks(q.uid, "c") == ()  # neither NUMA-bound nor hugepages: not placed

    run(tmp_path, body, policy="best-effort")


def test_done_when_on_the_numa2_fixture_tree(tmp_path) -> None:
    """The issue's case: --memory 512Mi --hugepages-2Mi 64Mi, dedicated, single-numa-node, on the
    capacity read from the 2-node fixture tree: CPUs, memory and pages on one node, mems that node."""
    from pathlib import Path

    from agent.memory.policy import build_capacity
    from agent.memory.sysfs import read_memory

    tree = Path(__file__).resolve().parents[2] / "fixtures" / "memory" / "numa2" / "sys"
    capacity = build_capacity(read_memory(tree), {})

    async def main() -> None:
        node = await Node(tmp_path, M2, "single-numa-node", "container", memory_capacity=capacity).start()
        try:
            p = (await node.workloads.admit_manifest(pod("job", cpus=2, memory="512Mi", pages="64Mi"))).pod
            a = p.assignments["c"]
            (numa,) = a.numa_affinity
            assert set(a.mems) == {numa}
            assert {node.workloads.cpu_policy.numa_of()[c] for c in a.cpus} == {numa}
            blocks = {b.resource: b for b in node.memory.blocks(p.uid, "c")}
            assert blocks["memory"].per_node == ((numa, 512 * MB),)
            assert blocks["hugepages-2Mi"].per_node == ((numa, 64 * MB),)
            free = {(n.node, n.resource): n.free for n in node.memory.nodes()}
            assert free[(numa, "hugepages-2Mi")] == capacity[numa]["hugepages-2Mi"].allocatable - 64 * MB
        finally:
            await node.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_pod_scope_sums_the_app_containers(tmp_path) -> None:
    two = json.loads(pod("two", cpus=1, pages="64Mi"))
    c2 = dict(two["spec"]["containers"][0], name="d")
    two["spec"]["containers"].append(c2)

    async def main() -> None:
        node = await Node(tmp_path, M2, "single-numa-node", "pod", memory_capacity=CAPACITY).start()
        try:
            p = (await node.workloads.admit_manifest(json.dumps(two))).pod
            nodes = {b.numa_nodes for c in ("c", "d") for b in node.memory.blocks(p.uid, c)}
            assert len(nodes) == 1  # both containers' memory and pages on the pod's one node
        finally:
            await node.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_pages_the_kernel_gained_since_the_last_read_count_for_the_next_admission(tmp_path) -> None:
    """A pod that does not fit has the pools read again (issue 37 item 1): pages reserved a
    moment ago admit it; with nothing new the refusal says the pools were read for it."""
    none = {n: {"memory": Capacity(2 * GB, 0, 2 * GB), "hugepages-2Mi": Capacity(0, 0, 0, 2 * MB)} for n in (0, 1)}
    reads: list[int] = []

    async def main() -> None:
        node = await Node(tmp_path, M2, "single-numa-node", "container", memory_capacity=none).start()
        machine = {"now": none}

        async def rescan() -> None:
            reads.append(1)
            if machine["now"] != node.memory.policy.capacity:
                node.memory.reconcile(machine["now"])

        node.memory.rescan = rescan
        try:
            with pytest.raises(AdmissionError) as e:
                await node.workloads.admit_manifest(pod("p1", cpus=1, pages="8Mi"))
            assert "read again for this request" in e.value.message, e.value.message
            assert "echo N > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages" in e.value.message
            machine["now"] = CAPACITY  # echo 64 > .../nr_hugepages on each node
            got = await node.workloads.admit_manifest(pod("p1", cpus=1, pages="8Mi"))
            assert got.pod is not None
        finally:
            await node.stop()

    asyncio.run(asyncio.wait_for(main(), 60))
    assert len(reads) == 2
