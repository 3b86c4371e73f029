"""Admission with ResourceClaims on a two-node machine: the topology manager aligns a claim's
device with the container's CPUs (the DRA hint provider), and a refused claim rolls the pod back."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent.devices.model import Device, DevNode, Inventory
from agent.devices.rules import assign
from agent.dra.catalog import catalog
from agent.dra.driver import NodeDevices
from agent.dra.files import ClaimFiles
from agent.dra.podclaims import PodClaimService
from agent.workloads.errors import AdmissionError
from tests.unit.dra.driver_support import RULE, claim_doc, make_driver, write_claim
from tests.unit.workloads.admission_node import MACHINES, Node

M2 = MACHINES[0]  # 2 NUMA nodes x 4 CPUs


def numa_loops() -> NodeDevices:
    """loop0 on node 0, loop1 on node 1."""
    devs = {f"loop{i}": Device(f"loop{i}", "block", f"loop{i}", f"/sys/devices/virtual/block/loop{i}", numa_node=i,
                               dev_nodes=(DevNode(f"/dev/loop{i}", "block", 7, i),)) for i in range(2)}
    inv = Inventory(devs)
    return NodeDevices(inv, {RULE.name: RULE}, catalog(inv, assign(inv, (RULE,)), "node1", "hwagent.io"))


def pod(name: str, claim: str) -> str:
    ann = {"katalyst.kubewharf.io/qos_level": "dedicated_cores",
           "katalyst.kubewharf.io/memory_enhancement": '{"numa_binding": "true"}'}
    return json.dumps({"metadata": {"name": name, "annotations": ann}, "spec": {
        "resourceClaims": [{"name": "disk", "resourceClaimName": claim}],
        "containers": [{"name": "c", "command": ["sleep", "1"], "resources": {
            "limits": {"cpu": "2"}, "claims": [{"name": "disk"}]}}]}})


def run(tmp_path, policy: str, body) -> None:
    async def main():
        node = await Node(tmp_path / "node", M2, policy, "container").start()
        root = tmp_path / "dra-root"
        drv = make_driver(root)
        drv._node = numa_loops
        node.workloads.pod_claims = PodClaimService(drv, ClaimFiles(root), numa_loops)
        try:
            await body(node.workloads, root)
        finally:
            await node.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_claim_device_and_cpus_share_a_numa_node(tmp_path) -> None:
    # node 0's device is taken by a claim allocated by hand: the pod's claim can only be met on
    # node 1, so the topology manager must put the CPUs there too
    async def body(w, root):
        write_claim(root, claim_doc("held", "uid-h", ["loop0"]))
        write_claim(root, claim_doc("mine", "uid-m", None))
        res = await w.admit_manifest(pod("p", "mine"))
        a = res.pod.assignments["c"]
        assert a.numa_affinity == frozenset({1}), a
        assert a.devices["resourceclaim/mine"] == ("loop1",)
        assert a.grant.cdi_devices == ("hwagent.io/claim=uid-m-loop1",)
        assert set(a.cpus) <= set(M2.topology.numa_nodes[1].cpus), a.cpus

    run(tmp_path, "single-numa-node", body)


def test_a_refused_claim_refuses_the_pod_and_frees_its_cpus(tmp_path) -> None:
    async def body(w, root):
        write_claim(root, claim_doc("big", "uid-b", None, count=3))
        with pytest.raises(AdmissionError) as e:
            await w.admit_manifest(pod("p", "big"))
        assert e.value.code == "RESOURCE_EXHAUSTED" and "needs 3 device" in e.value.message
        assert w.cpu_policy.allocations() == [] or all(r.pod_name != "p" for r in w.cpu_policy.allocations())
        assert ClaimFiles(root).load().claims[("default", "big")].allocation is None

    run(tmp_path, "best-effort", body)
