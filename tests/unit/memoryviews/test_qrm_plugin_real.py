"""Kubelet mode end to end: the memory component (the real manager, on the
numa2 fixture's sysfs: 2 nodes of 16 GiB, 2 MiB and 1 GiB pages) and the memory
plugin component, asked by a Katalyst-shaped client over the plugin's socket.
What the plugin answers is what the manager holds, and a refusal leaves both
as they were."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import grpc
import pytest

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.config import section_defaults
from agent.contracts import MEMORY_MANAGER, DaemonContext
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY
from agent.memory.component import create
from agent.memory.plugin import factory
from agent.topology.model import synthetic

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "memory" / "numa2" / "sys"
BOUND = {QOS_KEY: "dedicated_cores", MEMORY_ENHANCEMENT_KEY: json.dumps({"numa_binding": "true"})}
MI = 1 << 20


def rq(uid: str, hint=None, **requests) -> pb.ResourceRequest:
    m = pb.ResourceRequest(pod_uid=uid, pod_namespace="ns", pod_name=uid, container_name="c",
                           container_type=pb.MAIN, resource_name="memory", annotations=BOUND,
                           resource_requests={k.replace("_", "-"): float(v) for k, v in requests.items()})
    if hint is not None:
        m.hint.CopyFrom(pb.TopologyHint(nodes=hint, preferred=True))
    return m


def test_a_qrm_client_places_memory_and_pages_through_the_real_manager(short_tmp):
    async def main():
        cfg = section_defaults().replace("daemon", root_dir=str(short_tmp / "root"), sysfs_root=str(FIXTURE),
                                         kubelet_root_dir=str(short_tmp / "kubelet"))
        ctx = DaemonContext(config=cfg, root_dir=short_tmp / "root", mode="kubelet", log=logging.getLogger("t"),
                            topology=synthetic(sockets=2, numa_per_socket=1, cores_per_numa=2))
        (short_tmp / "kubelet" / "plugins_registry").mkdir(parents=True)
        memory, plugin = create(ctx), factory(ctx)
        assert memory is not None and plugin is not None
        await memory.start(ctx)
        await plugin.start(ctx)
        manager = ctx.lookup(MEMORY_MANAGER)
        assert manager is not None
        try:
            async with grpc.aio.insecure_channel(f"unix://{plugin.socket_path}") as ch:
                stub = pb_grpc.ResourcePluginStub(ch)
                # 192 pages of 2 MiB fit on node 0 (256) and node 1 (320)
                h = await stub.GetTopologyHints(rq("a", memory=512 * MI, hugepages_2Mi=384 * MI))
                hints = [(list(x.nodes), x.preferred) for x in h.resource_hints["memory"].hints]
                assert ([0], True) in hints and ([1], True) in hints
                r = await stub.Allocate(rq("a", hint=[1], memory=512 * MI, hugepages_2Mi=384 * MI))
                info = r.allocation_result.resource_allocation["memory"]
                assert (info.oci_property_name, info.allocation_result, info.allocated_quantity) == (
                    "CpusetMems", "1", 512 * MI)
                assert {(b.resource, b.size, b.numa_nodes) for b in manager.blocks("a", "c")} == {
                    ("memory", 512 * MI, (1,)), ("hugepages-2Mi", 384 * MI, (1,))}
                free = {(n.node, n.resource): n.free for n in manager.nodes()}
                assert free[(1, "hugepages-2Mi")] == (320 - 192) * 2 * MI

                # node 1 has 128 pages left: 256 more pages fit only node 0
                h = await stub.GetTopologyHints(rq("b", memory=MI, hugepages_2Mi=512 * MI))
                assert [list(x.nodes) for x in h.resource_hints["memory"].hints if x.preferred] == [[0]]
                before = (manager.nodes(), dict(manager.all_blocks()))
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await stub.Allocate(rq("b", hint=[1], memory=MI, hugepages_2Mi=512 * MI))
                assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await stub.Allocate(rq("b", hint=[0], memory=MI, hugepages_16Gi=16 * 1024 * MI))
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
                assert (manager.nodes(), dict(manager.all_blocks())) == before

                t = await stub.GetTopologyAwareResources(pb.GetTopologyAwareResourcesRequest(pod_uid="a",
                                                                                               container_name="c"))
                q = t.container_topology_aware_resources.allocated_resources["memory"].topology_aware_quantity_list
                assert [(x.node, x.resource_value) for x in q] == [(1, 512 * MI)]
                await stub.RemovePod(pb.RemovePodRequest(pod_uid="a"))
                assert manager.blocks("a", "c") == ()
                assert {(n.node, n.resource): n.free for n in manager.nodes()}[(1, "hugepages-2Mi")] == 320 * 2 * MI
        finally:
            await plugin.stop()
            await memory.stop()

    asyncio.run(asyncio.wait_for(main(), 60))
