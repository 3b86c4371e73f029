"""The ResourcePlugin + Registration services end to end over a real unix socket,
and restart from the checkpoint. Cgroup enforcement points at a fake v2 tree."""

from __future__ import annotations

import asyncio
import json
import math

import grpc
import pytest

from agent.contracts import CPU_POLICY
from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.cpu.checkpoint import FILE_NAME
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY
from agent.topology.model import synthetic

from .common import component, make_ctx

TOPO = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)


def fake_v2(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpuset cpu\n")
    return root


def rq(uid, qos=None, cpus=2.0, mem=None, hint=None, **kw):
    ann = {}
    if qos:
        ann[QOS_KEY] = qos
    if mem:
        ann[MEMORY_ENHANCEMENT_KEY] = json.dumps(mem)
    kw.setdefault("container_type", pb.MAIN)
    m = pb.ResourceRequest(
        pod_uid=uid, pod_namespace="ns", pod_name=uid, container_name="c",
        resource_name="cpu", resource_requests={"cpu": cpus}, annotations=ann, **kw,
    )  # fmt: skip
    if hint is not None:
        m.hint.CopyFrom(pb.TopologyHint(nodes=hint, preferred=True))
    return m


async def _run(tmp_path, body, **cpu):
    ctx = make_ctx(tmp_path / "root", TOPO, fake_v2(tmp_path / "cg"), reserved_cpus=2, **cpu)
    comp = component(ctx)
    await comp.start(ctx)
    try:
        async with grpc.aio.insecure_channel(f"unix://{comp.socket_path}") as ch:
            await body(comp, ctx, pb_grpc.ResourcePluginStub(ch), reg_grpc.RegistrationStub(ch))
    finally:
        await comp.stop()
    return ctx


def test_end_to_end(tmp_path):
    async def body(comp, ctx, stub, reg):
        info = await reg.GetInfo(reg_pb.InfoRequest())
        assert (info.type, info.name, list(info.supported_versions)) == ("ResourcePlugin", "cpu", ["v1alpha1"])
        assert comp.socket_path == tmp_path / "root" / "cpu" / "qrm_cpu_plugin_dynamic.sock"
        opts = await stub.GetResourcePluginOptions(pb.Empty())
        assert (opts.pre_start_required, opts.with_topology_alignment, opts.need_reconcile) == (False, True, True)

        mem = {"numa_binding": "true", "numa_exclusive": "true"}
        h = await stub.GetTopologyHints(rq("d", "dedicated_cores", mem=mem))
        got = [(tuple(x.nodes), x.preferred) for x in h.resource_hints["cpu"].hints]
        assert got[:4] == [((0,), True), ((1,), True), ((2,), True), ((3,), True)] and len(got) == 11
        r = await stub.Allocate(rq("d", "dedicated_cores", mem=mem, hint=[0]))
        info = r.allocation_result.resource_allocation["cpu"]
        assert (info.oci_property_name, info.allocation_result, info.allocated_quantity) == ("CpusetCpus", "1,8-9", 3)
        assert [list(x.nodes) for x in info.resource_hints.hints] == [[0]]
        assert dict(r.annotations) == {QOS_KEY: "dedicated_cores", "numa_binding": "true", "numa_exclusive": "true"}

        r = await stub.Allocate(rq("s", cpus=2))
        assert r.allocation_result.resource_allocation["cpu"].allocation_result == "3-7,10-15"
        r = await stub.Allocate(rq("i", cpus=1, container_type=pb.INIT))
        assert not r.HasField("allocation_result") and dict(r.labels) == {QOS_KEY: "shared_cores"}

        alloc = await stub.GetResourcesAllocation(pb.GetResourcesAllocationRequest())
        assert sorted(alloc.pod_resources) == ["d", "s"]
        assert alloc.pod_resources["d"].container_resources["c"].resource_allocation["cpu"].allocation_result == "1,8-9"

        tar = await stub.GetTopologyAwareResources(pb.GetTopologyAwareResourcesRequest(pod_uid="s", container_name="c"))
        res = tar.container_topology_aware_resources.allocated_resources["cpu"]
        assert res.aggregated_quantity == 11
        assert [(q.node, q.resource_value) for q in res.topology_aware_quantity_list] == [(1, 3), (2, 4), (3, 4)]

        ar = await stub.GetTopologyAwareAllocatableResources(pb.GetTopologyAwareAllocatableResourcesRequest())
        a = ar.allocatable_resources["cpu"]
        assert (a.aggregated_allocatable_quantity, a.aggregated_capacity_quantity) == (14, 16)
        assert [q.resource_value for q in a.topology_aware_allocatable_quantity_list] == [3, 3, 4, 4]

        await stub.PreStartContainer(pb.PreStartContainerRequest(pod_uid="s", container_name="c"))
        await stub.RemovePod(pb.RemovePodRequest(pod_uid="s"))
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await stub.GetTopologyAwareResources(pb.GetTopologyAwareResourcesRequest(pod_uid="s", container_name="c"))
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        # the service other components use
        svc = ctx.lookup(CPU_POLICY)
        assert [(a.pod_uid, str(a.cpuset), a.qos_level) for a in svc.allocations()] == [
            ("d", "1,8-9", "dedicated_cores")
        ]

    ctx = asyncio.run(_run(tmp_path, body))
    assert ctx.lookup(CPU_POLICY) is None


BAD = [
    ("two keys", dict(resource_requests={"cpu": 1, "resource.katalyst.kubewharf.io/reclaimed_millicpu": 1000})),
    ("negative", dict(resource_requests={"cpu": -1})),
    ("nan", dict(resource_requests={"cpu": math.nan})),
    ("unknown qos", dict(annotations={QOS_KEY: "gold_cores"})),
    ("dedicated without binding", dict(annotations={QOS_KEY: "dedicated_cores"})),
    ("more cpus than exist", dict(resource_requests={"cpu": 17})),
    ("malformed enhancement", dict(annotations={MEMORY_ENHANCEMENT_KEY: "{numa_binding: true"})),
    ("non-string enhancement", dict(annotations={MEMORY_ENHANCEMENT_KEY: '{"numa_binding": true}'})),
    ("bad pool name", dict(annotations={"katalyst.kubewharf.io/cpu_enhancement": '{"cpuset_pool": "reclaim"}'})),
]


@pytest.mark.parametrize("name,fields", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_invalid_argument_and_changes_nothing(tmp_path, name, fields):
    async def body(comp, ctx, stub, reg):
        await stub.Allocate(rq("keep", cpus=1))
        before = comp.durable.policy.state
        ckpt = (tmp_path / "root" / "cpu" / FILE_NAME).read_bytes()
        m = pb.ResourceRequest(pod_uid="bad", container_name="c", container_type=pb.MAIN, resource_name="cpu")
        m.resource_requests.update(fields.get("resource_requests", {"cpu": 1}))
        m.annotations.update(fields.get("annotations", {}))
        for call in (stub.GetTopologyHints, stub.Allocate):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await call(m)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
            assert e.value.details()
        assert comp.durable.policy.state is before
        assert (tmp_path / "root" / "cpu" / FILE_NAME).read_bytes() == ckpt

    asyncio.run(_run(tmp_path, body))


def test_resource_exhausted_and_unimplemented(tmp_path):
    async def body(comp, ctx, stub, reg):
        mem = {"numa_binding": "true", "numa_exclusive": "false"}
        await stub.Allocate(rq("a", "dedicated_cores", cpus=3, mem=mem, hint=[0]))
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await stub.Allocate(rq("b", "dedicated_cores", cpus=1, mem=mem, hint=[0]))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await stub.Allocate(rq("c", "dedicated_cores", cpus=1, mem=mem))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "hint" in e.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await stub.AllocateForPod(pb.PodResourceRequest(pod_uid="x"))
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED

    asyncio.run(_run(tmp_path, body))


def test_restart_from_checkpoint(tmp_path):
    seen = {}

    async def first(comp, ctx, stub, reg):
        mem = {"numa_binding": "true", "numa_exclusive": "false"}
        r = await stub.Allocate(rq("d", "dedicated_cores", cpus=2, mem=mem, hint=[2]))
        seen["d"] = r.allocation_result.resource_allocation["cpu"].allocation_result
        r = await stub.Allocate(rq("s", cpus=1))
        seen["s"] = r.allocation_result.resource_allocation["cpu"].allocation_result
        seen["pools"] = dict(comp.durable.policy.state.pools)

    async def second(comp, ctx, stub, reg):
        alloc = await stub.GetResourcesAllocation(pb.GetResourcesAllocationRequest())
        got = {u: v.container_resources["c"].resource_allocation["cpu"].allocation_result
               for u, v in alloc.pod_resources.items()}  # fmt: skip
        assert got == {"d": seen["d"], "s": seen["s"]}
        assert comp.durable.policy.state.pools == seen["pools"]
        # fast path after restart: the kubelet re-admitting gets the same answer
        mem = {"numa_binding": "true", "numa_exclusive": "false"}
        r = await stub.Allocate(rq("d", "dedicated_cores", cpus=2, mem=mem, hint=[2]))
        assert r.allocation_result.resource_allocation["cpu"].allocation_result == seen["d"]
        # and machine state was regenerated: NUMA2 CPUs in use are not handed out again
        r = await stub.Allocate(rq("e", "dedicated_cores", cpus=2, mem=mem, hint=[2]))
        assert set(r.allocation_result.resource_allocation["cpu"].allocation_result.split(",")).isdisjoint(
            seen["d"].split(",")
        )

    asyncio.run(_run(tmp_path, first))
    asyncio.run(_run(tmp_path, second))


def test_corrupt_checkpoint_stops_start(tmp_path):
    async def noop(*a):
        pass

    asyncio.run(_run(tmp_path, noop))
    (tmp_path / "root" / "cpu" / FILE_NAME).write_text("{garbage")
    with pytest.raises(RuntimeError, match="accept_state_loss"):
        asyncio.run(_run(tmp_path, noop))
    asyncio.run(_run(tmp_path, noop, accept_state_loss=True))
    assert list((tmp_path / "root" / "cpu").glob(f"{FILE_NAME}.corrupt-*"))


def test_kubelet_mode_socket_in_kubelet_plugins_registry(tmp_path):
    async def main():
        ctx = make_ctx(tmp_path / "root", TOPO, fake_v2(tmp_path / "cg"), mode="kubelet")
        comp = component(ctx)
        await comp.start(ctx)
        try:
            assert comp.socket_path == tmp_path / "root" / "kubelet" / "plugins_registry" / "qrm_cpu_plugin_dynamic.sock"
            assert comp.socket_path.is_socket() and comp.healthy()
            async with grpc.aio.insecure_channel(f"unix://{comp.socket_path}") as ch:
                reg = reg_grpc.RegistrationStub(ch)
                await reg.NotifyRegistrationStatus(reg_pb.RegistrationStatus(plugin_registered=False, error="x"))
            assert not comp.healthy()
        finally:
            await comp.stop()
        assert not comp.socket_path.exists()

    asyncio.run(main())
