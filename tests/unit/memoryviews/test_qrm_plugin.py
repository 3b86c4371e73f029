"""Kubelet mode: the memory plugin over ResourcePlugin v1alpha1, asked as a
QRM-enabled kubelet asks Katalyst's memory plugin (plugin-watcher GetInfo, then
hints, Allocate with the merged hint, the reconcile and topology-aware reads,
RemovePod), over a real unix socket; the memory manager behind it is the
contract's stand-in. Bad input gets its own gRPC code (never UNKNOWN) and
changes nothing."""

from __future__ import annotations

import asyncio
import json
import logging

import grpc
import pytest

from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.config import section_defaults
from agent.contracts import MEMORY_MANAGER, DaemonContext
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY
from agent.memory.plugin import SOCKET_NAME, factory
from agent.topology.model import synthetic
from tests.unit.memoryviews.fake import MI, FakeAllocator, empty_allocator

TOPO = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=2)
BOUND = {QOS_KEY: "dedicated_cores", MEMORY_ENHANCEMENT_KEY: json.dumps({"numa_binding": "true"})}


def rq(uid: str, ann=None, hint=None, container="c", ctype=pb.MAIN, **requests) -> pb.ResourceRequest:
    m = pb.ResourceRequest(
        pod_uid=uid, pod_namespace="ns", pod_name=f"pod-{uid}", container_name=container, container_type=ctype,
        resource_name="memory", annotations=ann or {},
        resource_requests={k.replace("_", "-"): float(v) for k, v in requests.items()},
    )  # fmt: skip
    if hint is not None:
        m.hint.CopyFrom(pb.TopologyHint(nodes=hint, preferred=True))
    return m


def _ctx(base, mode="kubelet") -> DaemonContext:
    cfg = section_defaults().replace("daemon", root_dir=str(base / "root"),
                                     kubelet_root_dir=str(base / "kubelet"))
    return DaemonContext(config=cfg, root_dir=base / "root", topology=TOPO, mode=mode,
                         log=logging.getLogger("test"))


def _run(base, body, allocator: FakeAllocator | None = None):
    async def main():
        ctx = _ctx(base)
        alloc = allocator or empty_allocator()
        ctx.publish(MEMORY_MANAGER, alloc)
        comp = factory(ctx)
        assert comp is not None
        (base / "kubelet" / "plugins_registry").mkdir(parents=True)
        await comp.start(ctx)
        try:
            assert comp.socket_path == base / "kubelet" / "plugins_registry" / SOCKET_NAME
            async with grpc.aio.insecure_channel(f"unix://{comp.socket_path}") as ch:
                await body(alloc, pb_grpc.ResourcePluginStub(ch), reg_grpc.RegistrationStub(ch))
            assert comp.healthy()
        finally:
            await comp.stop()
        assert not comp.socket_path.exists()

    asyncio.run(main())


def _hints(resp) -> list[tuple[list[int], bool]]:
    return [(list(h.nodes), h.preferred) for h in resp.resource_hints["memory"].hints]


def test_a_katalyst_shaped_client_registers_hints_allocates_reads_and_removes(short_tmp):
    async def body(alloc, stub, reg):
        info = await reg.GetInfo(reg_pb.InfoRequest())
        assert (info.type, info.name, list(info.supported_versions)) == ("ResourcePlugin", "memory", ["v1alpha1"])
        assert info.endpoint.endswith(SOCKET_NAME)
        await reg.NotifyRegistrationStatus(reg_pb.RegistrationStatus(plugin_registered=True))
        opts = await stub.GetResourcePluginOptions(pb.Empty())
        assert (opts.pre_start_required, opts.with_topology_alignment, opts.need_reconcile) == (False, True, True)

        # a dedicated NUMA-bound container with memory and 2 MiB pages
        d = dict(ann=BOUND, memory=512 * MI, hugepages_2Mi=64 * MI)
        h = await stub.GetTopologyHints(rq("d", **d))
        assert (h.pod_uid, h.container_name, h.resource_name) == ("d", "c", "memory")
        assert _hints(h) == [([0], True), ([1], True), ([0, 1], False)]
        r = await stub.Allocate(rq("d", hint=[1], **d))
        assert (r.pod_uid, r.pod_name, r.container_name, r.resource_name) == ("d", "pod-d", "c", "memory")
        info = r.allocation_result.resource_allocation["memory"]
        assert (info.oci_property_name, info.allocation_result, info.allocated_quantity) == ("CpusetMems", "1", 512 * MI)
        assert (info.is_node_resource, info.is_scalar_resource) == (False, True)
        assert [list(x.nodes) for x in info.resource_hints.hints] == [[1]]
        assert dict(r.annotations) == BOUND
        assert [(b.resource, b.size, b.numa_nodes) for b in alloc.blocks("d", "c")] == [
            ("hugepages-2Mi", 64 * MI, (1,)), ("memory", 512 * MI, (1,))]
        # the same Allocate again (a kubelet restart) gets the same answer, nothing more taken
        again = await stub.Allocate(rq("d", hint=[1], **d))
        assert again.allocation_result == r.allocation_result
        # its sidecar follows the pod's node and holds nothing
        side = await stub.Allocate(rq("d", ann=BOUND, container="side", ctype=pb.SIDECAR, memory=0))
        assert side.allocation_result.resource_allocation["memory"].allocation_result == "1"
        assert alloc.blocks("d", "side") == ()

        # a shared container is not placed: the nodes no bound container holds, nothing recorded
        h = await stub.GetTopologyHints(rq("s", memory=256 * MI))
        assert _hints(h) == [] and "memory" in h.resource_hints
        s = await stub.Allocate(rq("s", memory=256 * MI))
        info = s.allocation_result.resource_allocation["memory"]
        assert (info.oci_property_name, info.allocation_result, info.allocated_quantity) == ("CpusetMems", "0", 0)
        assert alloc.blocks("s", "c") == ()
        # a shared container asking for hugepages is placed
        p = await stub.Allocate(rq("p", hint=[0], memory=128 * MI, hugepages_2Mi=32 * MI))
        assert p.allocation_result.resource_allocation["memory"].allocation_result == "0"

        got = await stub.GetResourcesAllocation(pb.GetResourcesAllocationRequest())
        assert {(u, c): (ra.resource_allocation["memory"].allocation_result,
                         ra.resource_allocation["memory"].allocated_quantity)
                for u, cr in got.pod_resources.items() for c, ra in cr.container_resources.items()} == {
            ("d", "c"): ("1", 512 * MI), ("p", "c"): ("0", 128 * MI)}
        t = await stub.GetTopologyAwareResources(pb.GetTopologyAwareResourcesRequest(pod_uid="d", container_name="c"))
        res = t.container_topology_aware_resources.allocated_resources["memory"]
        assert (t.pod_uid, t.container_topology_aware_resources.container_name) == ("d", "c")
        assert res.aggregated_quantity == 512 * MI
        assert [(q.node, q.resource_value) for q in res.topology_aware_quantity_list] == [(1, 512 * MI)]
        a = (await stub.GetTopologyAwareAllocatableResources(pb.GetTopologyAwareAllocatableResourcesRequest())
             ).allocatable_resources["memory"]
        assert [(q.node, q.resource_value) for q in a.topology_aware_allocatable_quantity_list] == [
            (0, 4096 * MI - 256 * MI), (1, 4096 * MI)]
        assert [(q.node, q.resource_value) for q in a.topology_aware_capacity_quantity_list] == [
            (0, 4096 * MI), (1, 4096 * MI)]

        await stub.RemovePod(pb.RemovePodRequest(pod_uid="d"))
        assert alloc.blocks("d", "c") == ()
        assert set((await stub.GetResourcesAllocation(pb.GetResourcesAllocationRequest())).pod_resources) == {"p"}

    _run(short_tmp, body)


BAD = [
    ("negative memory", lambda: rq("x", ann=BOUND, memory=-1), "INVALID_ARGUMENT", "byte count"),
    ("NaN memory", lambda: rq("x", ann=BOUND, memory=float("nan")), "INVALID_ARGUMENT", "byte count"),
    ("page size no node has", lambda: rq("x", memory=MI, hugepages_16Gi=16 * 1024 * MI), "INVALID_ARGUMENT",
     "hugepages-16Gi: no NUMA node has this page size"),
    ("unknown QoS", lambda: rq("x", ann={QOS_KEY: "gold"}, memory=MI), "INVALID_ARGUMENT", "not a known QoS"),
    ("bad enhancement JSON", lambda: rq("x", ann={QOS_KEY: "dedicated_cores", MEMORY_ENHANCEMENT_KEY: "{"},
                                         memory=MI), "INVALID_ARGUMENT", "not valid JSON"),
    ("another plugin's resource", lambda: pb.ResourceRequest(pod_uid="x", container_name="c", resource_name="cpu"),
     "INVALID_ARGUMENT", "this plugin serves 'memory'"),
    ("unknown container type", lambda: pb.ResourceRequest(pod_uid="x", container_name="c", container_type=42,
                                                           resource_name="memory"), "INVALID_ARGUMENT",
     "container_type"),
    ("no pod uid", lambda: pb.ResourceRequest(container_name="c", resource_name="memory"), "INVALID_ARGUMENT",
     "required"),
    ("too long a name", lambda: rq("u" * 300, ann=BOUND, memory=MI), "INVALID_ARGUMENT", "pod_uid"),
    ("more than any node has", lambda: rq("x", ann=BOUND, hint=[0], memory=5 * 1024 * MI), "RESOURCE_EXHAUSTED",
     "free per node"),
]


@pytest.mark.parametrize("what,make,code,says", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_with_its_code_and_changes_nothing(short_tmp, what, make, code, says):
    async def body(alloc, stub, reg):
        await stub.Allocate(rq("held", ann=BOUND, hint=[1], memory=MI))
        before = (dict(alloc.all_blocks()), alloc.nodes())
        for call in (stub.GetTopologyHints, stub.Allocate):
            if code == "RESOURCE_EXHAUSTED" and call == stub.GetTopologyHints:
                continue  # no node fits: no hints (the topology manager refuses), not an error
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await call(make())
            assert e.value.code().name == code, (what, e.value.details())
            assert says in e.value.details(), e.value.details()
        assert (dict(alloc.all_blocks()), alloc.nodes()) == before

    _run(short_tmp, body)


def test_other_bad_calls_get_their_codes(short_tmp):
    async def body(alloc, stub, reg):
        cases = [
            (stub.RemovePod(pb.RemovePodRequest()), "INVALID_ARGUMENT"),
            (stub.RemovePod(pb.RemovePodRequest(pod_uid="u" * 300)), "INVALID_ARGUMENT"),
            (stub.GetTopologyAwareResources(pb.GetTopologyAwareResourcesRequest(pod_uid="nope", container_name="c")),
             "NOT_FOUND"),
            (stub.GetTopologyAwareResources(pb.GetTopologyAwareResourcesRequest(pod_uid="u" * 300,
                                                                                container_name="c")),
             "INVALID_ARGUMENT"),
            (stub.GetPodTopologyHints(pb.PodResourceRequest(pod_uid="x")), "UNIMPLEMENTED"),
            (stub.AllocateForPod(pb.PodResourceRequest(pod_uid="x")), "UNIMPLEMENTED"),
        ]
        for call, code in cases:
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await call
            assert e.value.code().name == code, e.value.details()
        # removing a pod the manager holds nothing of is not an error (the kubelet removes every pod)
        await stub.RemovePod(pb.RemovePodRequest(pod_uid="never-seen"))

    _run(short_tmp, body)


def test_only_kubelet_mode_serves_it_and_without_a_memory_manager_nothing_is_served(short_tmp):
    assert factory(_ctx(short_tmp, mode="standalone")) is None

    async def main():
        ctx = _ctx(short_tmp)
        comp = factory(ctx)
        assert comp is not None
        await comp.start(ctx)
        assert comp._server is None and comp.healthy()
        await comp.stop()

    asyncio.run(main())
