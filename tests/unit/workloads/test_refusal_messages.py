"""A refusal's line is consistent: "no cpu left for shared pods" never sits beside a bare
"cpu 0=1 free" that the shared pod cannot use (issue 23)."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent.topology.model import synthetic
from agent.workloads.errors import AdmissionError
from tests.unit.workloads.admission_node import Machine, Node

ONE_NODE = Machine("1n", synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2, threads_per_core=1), {})


def pod(name: str, qos: str, cpu: str, limit: bool) -> bytes:
    ann = {"katalyst.kubewharf.io/qos_level": qos}
    if qos == "dedicated_cores":
        ann["katalyst.kubewharf.io/memory_enhancement"] = json.dumps({"numa_binding": "true"})
    res = {"requests": {"cpu": cpu}, **({"limits": {"cpu": cpu}} if limit else {})}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": ann},
                       "spec": {"containers": [{"name": "c", "command": ["true"], "resources": res}]}}).encode()


def test_no_cpu_for_shared_pods_does_not_also_say_a_cpu_is_free(tmp_path):
    async def main() -> str:
        node = await Node(tmp_path, ONE_NODE, "single-numa-node", "container").start()
        try:
            await node.workloads.admit_manifest(pod("job", "dedicated_cores", "1", True))
            with pytest.raises(AdmissionError) as e:
                await node.workloads.admit_manifest(pod("svc", "shared_cores", "500m", False))
            dry = await node.workloads.admit_manifest(pod("svc", "shared_cores", "500m", False), dry_run=True)
            assert not dry.would_admit and "no cpu" in dry.reason and "per NUMA node" not in dry.reason, dry.reason
            return e.value.message
        finally:
            await node.stop()

    msg = asyncio.run(main())
    assert "no cpu" in msg and "shared_cores" in msg, msg
    # the one CPU left is free for a dedicated pod only, and the line says so, with why
    assert "free per NUMA node: cpu 0=1" not in msg, msg
    assert "for dedicated pods only" in msg and "NUMA-bound dedicated" in msg, msg


def test_the_refusal_says_which_dedicated_numa_rule_left_no_shared_cpu(tmp_path):
    """Under exclusive-cores a dedicated pod is refused only when its CPUs would be the shared
    pods' last ones; the line must not give Katalyst's whole-node rule as the reason."""

    async def main() -> tuple[str, str]:
        node = await Node(tmp_path / "x", ONE_NODE, "single-numa-node", "container", "exclusive-cores").start()
        try:
            await node.workloads.admit_manifest(pod("svc", "shared_cores", "500m", False))
            with pytest.raises(AdmissionError) as e:
                await node.workloads.admit_manifest(pod("job", "dedicated_cores", "2", True))
            excl = e.value.message
        finally:
            await node.stop()
        node = await Node(tmp_path / "w", ONE_NODE, "single-numa-node", "container", "whole-node").start()
        try:
            await node.workloads.admit_manifest(pod("svc", "shared_cores", "500m", False))
            with pytest.raises(AdmissionError) as e:
                await node.workloads.admit_manifest(pod("job", "dedicated_cores", "1", True))
            return excl, e.value.message
        finally:
            await node.stop()

    excl, whole = asyncio.run(main())
    assert "no cpu for the shared_cores" in excl and "whole-node" not in excl and "NUMA node that holds" not in excl, excl
    assert "cpus of NUMA-bound dedicated pods leave the shared pools" in excl, excl
    assert 'dedicated_numa = "whole-node"' in whole and "NUMA node that holds a NUMA-bound dedicated pod" in whole, whole
