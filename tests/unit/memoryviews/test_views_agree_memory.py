"""Issue 25's "done when", on a 2-node fixture machine with the real memory
manager in admission: a dedicated NUMA-bound pod with memory 512Mi and
hugepages-2Mi 64Mi under single-numa-node gets CPUs, memory and pages on one
node, and describe (the admission API's Get), pod-resources List, `hwagent
memory`'s view and the metrics show the same blocks, because each asks the
memory manager when it answers. After removal none of them shows any."""

from __future__ import annotations

import asyncio

from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from agent.api.admission.v1 import api_pb2 as pb
from agent.api.podresources.v1 import api_pb2 as pr
from agent.podresources.server import PodResourcesServicer
from agent.status.memorymetrics import MemoryCollector
from agent.status.views import Handles, memory_view
from agent.workloads.podjson import pod_json
from agent.workloads.server import AdmissionServicer
from tests.unit.memory.test_admission import CAPACITY, M2, pod
from tests.unit.workloads.admission_node import Node

MB = 1 << 20


def test_describe_pod_resources_memory_view_and_metrics_agree(tmp_path):
    async def main():
        node = await Node(tmp_path, M2, "single-numa-node", "container", memory_capacity=CAPACITY).start()
        try:
            w = node.workloads
            admitted = (await w.admit_manifest(pod("web", cpus=2, memory="512Mi", pages="64Mi"))).pod
            (numa,) = admitted.assignments["c"].numa_affinity
            assert {w.cpu_policy.numa_of()[c] for c in admitted.assignments["c"].cpus} == {numa}
            want = {("memory", 512 * MB, (numa,)), ("hugepages-2Mi", 64 * MB, (numa,))}

            api = AdmissionServicer(w)
            got = pod_json((await api.Get(pb.GetRequest(pod=pb.PodRef(name="web")), None)).pod, record=True)
            described = {(b["resource"], b["size"], tuple(b["numa_nodes"])) for b in got["containers"][0]["memory"]}

            servicer = PodResourcesServicer(cpus=lambda: w.cpu_policy, workloads=lambda: w, active_pods=lambda: w,
                                            memory=lambda: node.memory)
            listed = await servicer.List(pr.ListPodResourcesRequest(), None)
            (c,) = [c for p in listed.pod_resources if p.name == "web" for c in p.containers]
            in_pod_resources = {(m.memory_type, m.size, tuple(n.ID for n in m.topology.nodes)) for m in c.memory}

            view = memory_view(Handles(cpu=w.cpu_policy, memory=node.memory))
            (row,) = view["containers"]
            in_view = {(b["resource"], b["size"], tuple(b["numa_nodes"])) for b in row["blocks"]}
            assert (row["namespace"], row["pod"]) == ("default", "web")  # the name joined from the CPU policy

            reg = CollectorRegistry()
            reg.register(MemoryCollector(lambda: node.memory))
            scrape = generate_latest(reg).decode()

            assert described == in_pod_resources == in_view == want
            assert f'hwagent_memory_allocated_bytes{{numa_node="{numa}",resource="hugepages-2Mi"}} 6.7108864e+07' \
                in scrape

            await w.remove("web", "default")
            assert node.memory.all_blocks() == {} or all(not b for b in node.memory.all_blocks().values())
            listed = await servicer.List(pr.ListPodResourcesRequest(), None)
            assert all(not c.memory for p in listed.pod_resources for c in p.containers)
            assert memory_view(Handles(memory=node.memory))["containers"] == []
        finally:
            await node.stop()

    asyncio.run(asyncio.wait_for(main(), 60))
