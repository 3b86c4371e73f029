"""The memory plugin over ResourcePlugin v1alpha1 (kubelet mode): what a
QRM-enabled kubelet asks of a memory plugin, answered by the memory manager.

Pure conversion between the wire and the contract (``MemoryAllocator``), the
way agent.cpu.server is for the CPU policy; every decision is the manager's.
The answers take Katalyst's memory QRM plugin's shapes: resource ``memory``;
hints under ``resource_hints["memory"]``; an allocation is
``resource_allocation["memory"]`` with ``oci_property_name`` ``CpusetMems``,
the NUMA nodes as a list (``"0"``, ``"0-1"``) in ``allocation_result``, the
bytes of ordinary memory in ``allocated_quantity`` and the hint it followed.

Which requests the manager places (docs/memory.md): a dedicated_cores
container with ``numa_binding``, and any container that asks for hugepages
(``hugepages-<size>`` keys in ``resource_requests``). Every other container is
not placed and is answered the memory nodes that no placed container holds
(all nodes when every one is held), as Katalyst answers shared and reclaimed
containers; nothing is recorded for it. A sidecar of a placed pod follows the
pod's nodes with nothing of its own.

Bad input is INVALID_ARGUMENT (a request that cannot be read: unknown QoS,
quantities that are not byte counts, a page size no node has), a request no
node can hold RESOURCE_EXHAUSTED with the manager's line naming per-node free
amounts, a container the manager holds nothing of NOT_FOUND; a refusal changes
nothing. Never UNKNOWN.
"""

from __future__ import annotations

import math
from typing import Any

import grpc

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.contracts.hints import TopologyHint
from agent.contracts.memory import (
    HUGEPAGES_PREFIX,
    MEMORY_RESOURCE,
    SPREAD_ANNOTATION,
    MemoryAllocator,
    MemoryBlock,
    MemoryRefused,
    MemoryRequest,
)
from agent.cpu.errors import NOT_FOUND, RESOURCE_EXHAUSTED, PolicyError, invalid
from agent.cpu.qos import DEDICATED, parse_qos
from agent.cpu.server import check_request_bounds
from agent.cpuset import CPUSet
from agent.limits import LimitError, check_name

__all__ = ["MemoryPluginServicer", "OCI_CPUSET_MEMS", "placed_request", "node_list"]

OCI_CPUSET_MEMS = "CpusetMems"
#: the largest byte count a request may name (int64, as the kubelet's quantities)
MAX_BYTES = (1 << 63) - 1


def _bytes(key: str, value: float) -> int:
    if not math.isfinite(value) or value < 0 or value > MAX_BYTES:
        raise invalid("bad_quantity", f"resource_requests[{key}] = {value!r} is not a byte count (0 .. 2^63-1)")
    return math.ceil(value)


def placed_request(m: pb.ResourceRequest, known: frozenset[str]) -> MemoryRequest | None:
    """The request as the manager takes it, or None for a container it does not place.

    ``known``: the memory resources some node has (a hugepage size no node has is
    refused here, before the manager is asked). Raises PolicyError (INVALID_ARGUMENT)."""
    check_request_bounds(m)
    if m.resource_name not in ("", MEMORY_RESOURCE):
        raise invalid("bad_request", f"resource_name {m.resource_name!r}: this plugin serves {MEMORY_RESOURCE!r}")
    try:
        pb.ContainerType.Name(m.container_type)
    except ValueError:
        raise invalid("bad_request", f"unknown container_type {m.container_type}") from None
    if not m.pod_uid or not m.container_name:
        raise invalid("bad_request", "pod_uid and container_name are required")
    qos = parse_qos(m.annotations, m.labels)
    requests: dict[str, int] = {}
    for key, value in sorted(m.resource_requests.items()):
        if key != MEMORY_RESOURCE and not key.startswith(HUGEPAGES_PREFIX):
            continue  # another plugin's resource: not ours to place or refuse
        if key.startswith(HUGEPAGES_PREFIX) and key not in known:
            sizes = ", ".join(sorted(k for k in known if k.startswith(HUGEPAGES_PREFIX))) or "none"
            raise invalid("unknown_page_size", f"{key}: no NUMA node has this page size (configured: {sizes})")
        requests[key] = _bytes(key, value)
    hugepages = any(v > 0 for k, v in requests.items() if k.startswith(HUGEPAGES_PREFIX))
    if not ((qos.level == DEDICATED and qos.numa_binding) or hugepages):
        return None
    hint = None
    if m.HasField("hint"):
        hint = TopologyHint(frozenset(int(n) for n in m.hint.nodes) or None, m.hint.preferred)
    return MemoryRequest(
        pod_uid=m.pod_uid, container_name=m.container_name, requests=requests, pod_namespace=m.pod_namespace,
        pod_name=m.pod_name, hint=hint, spread_hugepages=m.annotations.get(SPREAD_ANNOTATION) == "true",
    )


def node_list(blocks: tuple[MemoryBlock, ...]) -> CPUSet:
    """Every NUMA node of the blocks (the container's ``cpuset.mems``), as a node set."""
    return CPUSet(n for b in blocks for n in b.numa_nodes)


def _memory_bytes(blocks: tuple[MemoryBlock, ...]) -> int:
    return sum(b.size for b in blocks if b.resource == MEMORY_RESOURCE)


def _per_node(blocks: tuple[MemoryBlock, ...], resource: str = MEMORY_RESOURCE) -> dict[int, int]:
    out: dict[int, int] = {}
    for b in blocks:
        if b.resource != resource:
            continue
        for n, size in b.split().items():
            out[n] = out.get(n, 0) + size
    return out


def _hints_pb(hints: list[TopologyHint] | None) -> pb.ListOfTopologyHints:
    if hints is None:
        return pb.ListOfTopologyHints()
    return pb.ListOfTopologyHints(hints=[pb.TopologyHint(nodes=list(h.nodes), preferred=h.preferred) for h in hints])


def _echo(m: pb.ResourceRequest) -> dict[str, Any]:
    """The container's identity, which the QRM client matches answers on."""
    return {
        "pod_uid": m.pod_uid, "pod_namespace": m.pod_namespace, "pod_name": m.pod_name,
        "container_name": m.container_name, "container_type": m.container_type,
        "container_index": m.container_index, "pod_role": m.pod_role, "pod_type": m.pod_type,
        "resource_name": MEMORY_RESOURCE, "native_qos_class": m.native_qos_class,
    }


def _info(mems: CPUSet, quantity: int, hint: pb.TopologyHint | None = None) -> pb.ResourceAllocationInfo:
    info = pb.ResourceAllocationInfo(
        oci_property_name=OCI_CPUSET_MEMS, is_node_resource=False, is_scalar_resource=True,
        allocated_quantity=float(quantity), allocation_result=str(mems),
    )
    if hint is not None:
        info.resource_hints.CopyFrom(pb.ListOfTopologyHints(hints=[hint]))
    return info


async def _abort(context: grpc.aio.ServicerContext, e: PolicyError) -> None:
    await context.abort(getattr(grpc.StatusCode, e.code), e.message)


class MemoryPluginServicer(pb_grpc.ResourcePluginServicer):
    """Answers from ``allocator`` (the handle the memory manager publishes)."""

    def __init__(self, allocator: MemoryAllocator) -> None:
        self.allocator = allocator

    # -- what the manager knows ------------------------------------------------------------
    def _known(self) -> frozenset[str]:
        return frozenset(n.resource for n in self.allocator.nodes())

    def _all_nodes(self) -> CPUSet:
        return CPUSet(n.node for n in self.allocator.nodes())

    def _unbound_nodes(self) -> CPUSet:
        """The memory nodes no placed container holds (every node when all are held)."""
        held = CPUSet.union_all(node_list(b) for b in self.allocator.all_blocks().values())
        free = self._all_nodes() - held
        return free or self._all_nodes()

    def _pod_blocks(self, pod_uid: str) -> tuple[MemoryBlock, ...]:
        return tuple(b for (uid, _), blocks in self.allocator.all_blocks().items() if uid == pod_uid for b in blocks)

    # -- ResourcePlugin --------------------------------------------------------------------
    async def GetTopologyHints(self, request, context):
        try:
            req = placed_request(request, self._known())
            hints = None if req is None else await self.allocator.get_topology_hints(req)
        except PolicyError as e:
            await _abort(context, e)
        except MemoryRefused as e:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, e.message)
        return pb.ResourceHintsResponse(**_echo(request), resource_hints={MEMORY_RESOURCE: _hints_pb(hints)},
                                        labels=dict(request.labels), annotations=dict(request.annotations))

    async def Allocate(self, request, context):
        try:
            req = placed_request(request, self._known())
            nothing = req is None or not any(req.requests.values())
            if nothing and request.container_type == pb.SIDECAR and self._pod_blocks(request.pod_uid):
                mems, quantity = node_list(self._pod_blocks(request.pod_uid)), 0  # follows its pod, holds nothing
            elif req is None:
                mems, quantity = self._unbound_nodes(), 0
            else:
                blocks = await self.allocator.allocate(req)
                mems, quantity = node_list(blocks) or self._unbound_nodes(), _memory_bytes(blocks)
        except PolicyError as e:
            await _abort(context, e)
        except MemoryRefused as e:
            await _abort(context, PolicyError(RESOURCE_EXHAUSTED, e.reason, e.message))
        resp = pb.ResourceAllocationResponse(**_echo(request), labels=dict(request.labels),
                                             annotations=dict(request.annotations))
        hint = request.hint if request.HasField("hint") else None
        resp.allocation_result.resource_allocation[MEMORY_RESOURCE].CopyFrom(_info(mems, quantity, hint))
        return resp

    async def RemovePod(self, request, context):
        try:
            if not request.pod_uid:
                raise invalid("bad_request", "pod_uid is empty")
            check_name("pod_uid", request.pod_uid)
        except LimitError as e:
            await _abort(context, invalid("too_long", str(e)))
        except PolicyError as e:
            await _abort(context, e)
        try:
            await self.allocator.release_pod(request.pod_uid)
        except OSError as e:  # not persisted: nothing released, the kubelet retries
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"memory state not written: {e}")
        return pb.RemovePodResponse()

    async def GetResourcesAllocation(self, request, context):
        resp = pb.GetResourcesAllocationResponse()
        for (uid, cname), blocks in sorted(self.allocator.all_blocks().items()):
            if not blocks:
                continue
            cr = resp.pod_resources[uid].container_resources[cname]
            cr.resource_allocation[MEMORY_RESOURCE].CopyFrom(_info(node_list(blocks), _memory_bytes(blocks)))
        return resp

    async def GetTopologyAwareResources(self, request, context):
        try:
            check_name("pod_uid", request.pod_uid)
            check_name("container_name", request.container_name)
        except LimitError as e:
            await _abort(context, invalid("too_long", str(e)))
        blocks = self.allocator.blocks(request.pod_uid, request.container_name)
        if not blocks:
            await _abort(context, PolicyError(NOT_FOUND, "not_found", f"the memory manager holds nothing of pod "
                                              f"{request.pod_uid} container {request.container_name}"))
        per = _per_node(blocks)
        res = pb.TopologyAwareResource(is_node_resource=False, is_scalar_resource=True)
        res.aggregated_quantity = res.original_aggregated_quantity = float(_memory_bytes(blocks))
        for lst in (res.topology_aware_quantity_list, res.original_topology_aware_quantity_list):
            lst.extend(pb.TopologyAwareQuantity(resource_value=float(v), node=n) for n, v in sorted(per.items()))
        return pb.GetTopologyAwareResourcesResponse(
            pod_uid=request.pod_uid,
            container_topology_aware_resources=pb.ContainerTopologyAwareResources(
                container_name=request.container_name, allocated_resources={MEMORY_RESOURCE: res}),
        )

    async def GetTopologyAwareAllocatableResources(self, request, context):
        mem = [n for n in self.allocator.nodes() if n.resource == MEMORY_RESOURCE]
        r = pb.AllocatableTopologyAwareResource(
            is_node_resource=False, is_scalar_resource=True,
            aggregated_allocatable_quantity=float(sum(n.allocatable for n in mem)),
            aggregated_capacity_quantity=float(sum(n.total for n in mem)),
            topology_aware_allocatable_quantity_list=[
                pb.TopologyAwareQuantity(resource_value=float(n.allocatable), node=n.node) for n in mem],
            topology_aware_capacity_quantity_list=[
                pb.TopologyAwareQuantity(resource_value=float(n.total), node=n.node) for n in mem],
        )
        return pb.GetTopologyAwareAllocatableResourcesResponse(allocatable_resources={MEMORY_RESOURCE: r})

    async def GetResourcePluginOptions(self, request, context):
        return pb.ResourcePluginOptions(pre_start_required=False, with_topology_alignment=True, need_reconcile=True)

    async def PreStartContainer(self, request, context):
        return pb.PreStartContainerResponse()

    async def GetPodTopologyHints(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "pod-level hints are not implemented by the memory plugin")

    async def AllocateForPod(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                            "pod-level allocation is not implemented by the memory plugin")
