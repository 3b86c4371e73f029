"""`describe` and `ps` say what a pod has, without gaps or contradictions (issue 37 item 9):
the memory limit is in the text (JSON had it), and a NUMA-bound dedicated pod reads as bound
to its node, not "NUMA affinity any" beside "memory nodes 0", whatever the topology manager's
policy (under ``none`` there is no merged hint, yet the CPU policy bound the pod)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agent.cpuset import CPUSet
from tests.unit.workloads.admission_node import MACHINES, Node

DEDICATED = {
    "katalyst.kubewharf.io/qos_level": "dedicated_cores",
    "katalyst.kubewharf.io/memory_enhancement": json.dumps({"numa_binding": "true"}),
}


def test_a_numa_bound_dedicated_pod_has_its_node_as_affinity_under_every_policy(tmp_path: Path) -> None:
    manifest = json.dumps({"metadata": {"name": "job", "annotations": DEDICATED},
                           "spec": {"containers": [{"name": "c", "command": ["sleep", "1"],
                                                    "resources": {"limits": {"cpu": "2"}}}]}})

    async def main(policy: str) -> None:
        node = await Node(tmp_path / policy, MACHINES[0], policy, "container").start()
        try:
            a = (await node.workloads.admit_manifest(manifest)).pod.assignments["c"]
            nodes = {node.workloads.cpu_policy.numa_of()[c] for c in a.cpus}
            assert a.mems == CPUSet(nodes) and a.numa_affinity == frozenset(nodes), (policy, a)
        finally:
            await node.stop()

    for policy in ("none", "best-effort", "single-numa-node"):
        asyncio.run(main(policy))


def test_the_resources_line_names_requests_and_limits_as_launch_took_them() -> None:
    from agent.commands.describe import resources_line

    assert resources_line({"cpu_request_milli": 100, "cpu_limit_milli": None, "memory_request_bytes": 128 << 20,
                           "memory_limit_bytes": 128 << 20, "extended": {}}) \
        == "cpu request 100m, memory limit 128Mi (request 128Mi)"
    assert resources_line({"cpu_request_milli": 2000, "cpu_limit_milli": 2000, "memory_request_bytes": None,
                           "memory_limit_bytes": 1 << 30, "extended": {"example.com/gpu": 1},
                           "hugepages": {"hugepages-2Mi": 64 << 20}}) \
        == "cpu request 2, limit 2, memory limit 1Gi, hugepages-2Mi 64Mi, example.com/gpu 1"
    assert resources_line({"cpu_request_milli": None, "cpu_limit_milli": None, "memory_request_bytes": None,
                           "memory_limit_bytes": None, "extended": {}}) is None


def test_status_counts_the_pods_ps_lists_ended_ones_included(tmp_path: Path) -> None:
    """`status` said "pods: 2 (from cpu policy allocations)" while `ps` listed 6: ended pods hold
    no CPUs. The registry owns which pods exist; status asks it, as ps does."""
    from agent.status.views import Handles, pods_view

    shared = {"katalyst.kubewharf.io/qos_level": "shared_cores"}

    def pod(name: str) -> str:
        return json.dumps({"metadata": {"name": name, "annotations": shared},
                           "spec": {"containers": [{"name": "c", "command": ["true"],
                                                    "resources": {"requests": {"cpu": "100m"}}}]}})

    async def main() -> tuple[list, str, int]:
        node = await Node(tmp_path, MACHINES[0], "none", "container").start()
        try:
            w = node.workloads
            for name in ("a", "b", "c"):
                await w.admit_manifest(pod(name))
            ended = w.registry.by_name("default", "a")
            await w.release(ended.pod.uid, why="Completed")
            listed, source = pods_view(Handles(cpu=node._engine, workloads=w))
            return listed, source, len(w.registry.records())
        finally:
            await node.stop()

    listed, source, in_registry = asyncio.run(main())
    assert [p["name"] for p in listed] == ["a", "b", "c"] and in_registry == 3, listed
    assert "registry" in source, source
