"""Issue 21: every view reads a container's CPUs from their owner, the CPU policy,
at the moment it answers, never the copy admission kept.

Two shared pods run, then a dedicated pod shrinks the shared pool: the admission
API (``hwagent ps``/``describe``) and pod-resources must both say what the CPU
policy holds now; the CPUs of the admission moment stay visible as history.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agent.api.admission.v1 import api_pb2 as pb
from agent.api.podresources.v1 import api_pb2 as pr
from agent.cpuset import CPUSet
from agent.podresources.server import PodResourcesServicer
from agent.workloads.server import AdmissionServicer
from tests.unit.workloads.admission_node import MACHINES, Node

SHARED = {"katalyst.kubewharf.io/qos_level": "shared_cores"}
DEDICATED = {
    "katalyst.kubewharf.io/qos_level": "dedicated_cores",
    "katalyst.kubewharf.io/memory_enhancement": json.dumps({"numa_binding": "true"}),
}


def manifest(name: str, ann: dict, cpu: str) -> str:
    return json.dumps({"metadata": {"name": name, "annotations": ann},
                       "spec": {"containers": [{"name": "c", "command": ["sleep", "1"],
                                                "resources": {"limits": {"cpu": cpu}}}]}})


def test_ps_and_describe_show_the_cpu_policys_cpus_after_the_pool_shrank(tmp_path: Path) -> None:
    async def main() -> None:
        node = await Node(tmp_path, MACHINES[0], "best-effort", "container").start()  # 8 CPUs, 2 nodes
        try:
            w = node.workloads
            await w.admit_manifest(manifest("s1", SHARED, "500m"))
            await w.admit_manifest(manifest("s2", SHARED, "500m"))
            admitted = {r.pod.spec.name: r.pod.assignments["c"].cpus for r in w.registry.records()}
            await w.admit_manifest(manifest("d", DEDICATED, "4"))
            now = {a.pod_name: a.cpuset for a in node.cpu_policy.state.containers()}
            assert now["s1"] != admitted["s1"], "the dedicated pod must shrink the shared pool for this test"

            api = AdmissionServicer(w)
            listed = await api.List(pb.ListRequest(), None)
            shown = {p.name: CPUSet(p.containers[0].cpu_ids) for p in listed.pods}
            assert shown == now, f"ps shows {shown}, the CPU policy holds {now}"
            got = (await api.Get(pb.GetRequest(pod=pb.PodRef(name="s1")), None)).pod
            assert CPUSet(got.containers[0].cpu_ids) == now["s1"]
            # the admission's CPUs are history, and shown as such
            assert any(f"admitted with cpus {admitted['s1']}" in e.message for e in got.events), list(got.events)

            res = await PodResourcesServicer(cpus=lambda: w.cpu_policy, workloads=lambda: w,
                                             active_pods=lambda: w).List(pr.ListPodResourcesRequest(), None)
            listed_pr = {p.name: CPUSet(p.containers[0].cpu_ids) for p in res.pod_resources}
            assert listed_pr == shown
        finally:
            await node.stop()

    asyncio.run(main())
