"""gRPC serving: resourceplugin.v1alpha1.ResourcePlugin and the kubelet
plugin-watcher pluginregistration.v1.Registration on one unix socket, as
Katalyst's QRM plugins do. Pure conversion between protobuf and the policy's
dataclasses, plus status-code mapping; all behaviour lives in the durable policy (agent.cpu.durable)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc

from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.cpu.durable import DurablePolicy
from agent.cpu.errors import PolicyError, invalid
from agent.contracts.hints import TopologyHint
from agent.contracts.cpu import CPU_RESOURCE, AllocateResult, Request
from agent.contracts.cpu import AllocationInfo
from agent.eventlog import get_logger
from agent.grpcguard import new_server
from agent.limits import LimitError, check_annotations, check_labels, check_name, check_qualified_name, shown
from agent.unixsock import serve_unix

__all__ = ["ResourcePluginServicer", "RegistrationServicer", "serve", "to_request"]

log = get_logger("hwagent.cpu")
OCI_CPUSET = "CpusetCpus"
PLUGIN_TYPE = "ResourcePlugin"
API_VERSION = "v1alpha1"


def check_request_bounds(m: pb.ResourceRequest) -> None:
    """Kubernetes' size bounds on every string of a request; raises PolicyError."""
    try:
        for kind in ("pod_uid", "pod_namespace", "pod_name", "container_name", "pod_role", "pod_type",
                     "native_qos_class"):
            check_name(kind, getattr(m, kind))
        check_qualified_name("resource_name", m.resource_name)
        for key in m.resource_requests:
            check_qualified_name("resource_requests key", key)
        check_annotations(m.annotations)
        check_labels(m.labels)
    except LimitError as e:
        raise invalid("too_long", str(e)) from None


def to_request(m: pb.ResourceRequest) -> Request:
    check_request_bounds(m)
    try:
        ctype = pb.ContainerType.Name(m.container_type)
    except ValueError:
        raise invalid("bad_request", f"unknown container_type {m.container_type}") from None
    hint = TopologyHint(frozenset(int(n) for n in m.hint.nodes), m.hint.preferred) if m.HasField("hint") else None
    return Request(
        pod_uid=m.pod_uid,
        pod_namespace=m.pod_namespace,
        pod_name=m.pod_name,
        container_name=m.container_name,
        container_type=ctype,
        container_index=m.container_index,
        pod_role=m.pod_role,
        pod_type=m.pod_type,
        resource_name=m.resource_name,
        hint=hint,
        resource_requests=dict(m.resource_requests),
        labels=dict(m.labels),
        annotations=dict(m.annotations),
        native_qos_class=m.native_qos_class,
    )


def _hints_pb(hints: list[TopologyHint] | None) -> pb.ListOfTopologyHints:
    if hints is None:
        return pb.ListOfTopologyHints()
    return pb.ListOfTopologyHints(hints=[pb.TopologyHint(nodes=list(h.nodes), preferred=h.preferred) for h in hints])


def _info(a: AllocationInfo, hint: TopologyHint | None = None, with_hints: bool = False) -> pb.ResourceAllocationInfo:
    info = pb.ResourceAllocationInfo(
        oci_property_name=OCI_CPUSET,
        is_node_resource=False,
        is_scalar_resource=True,
        allocated_quantity=float(len(a.cpuset)),
        allocation_result=str(a.cpuset),
    )
    if with_hints:
        info.resource_hints.CopyFrom(_hints_pb([hint] if hint else []))
    return info


def _echo(m: pb.ResourceRequest) -> dict[str, Any]:
    """The container's identity, which the QRM client matches answers on: echoed
    from the request into hints and allocation responses alike."""
    return {
        "pod_uid": m.pod_uid, "pod_namespace": m.pod_namespace, "pod_name": m.pod_name,
        "container_name": m.container_name, "container_type": m.container_type,
        "container_index": m.container_index, "pod_role": m.pod_role, "pod_type": m.pod_type,
        "resource_name": m.resource_name or CPU_RESOURCE, "native_qos_class": m.native_qos_class,
    }


def _alloc_response(m: pb.ResourceRequest, r: AllocateResult) -> pb.ResourceAllocationResponse:
    if r.empty:
        return pb.ResourceAllocationResponse()
    resp = pb.ResourceAllocationResponse(**_echo(m), labels=r.labels, annotations=r.annotations)
    if r.allocation is not None:
        resp.allocation_result.resource_allocation[CPU_RESOURCE].CopyFrom(_info(r.allocation, r.hint, True))
    elif r.debug:
        resp.allocation_result.resource_allocation[CPU_RESOURCE].CopyFrom(
            pb.ResourceAllocationInfo(is_node_resource=False, is_scalar_resource=True)
        )
    return resp


async def _abort(context: grpc.aio.ServicerContext, e: PolicyError) -> None:
    await context.abort(getattr(grpc.StatusCode, e.code), e.message)


class ResourcePluginServicer(pb_grpc.ResourcePluginServicer):
    def __init__(self, durable: DurablePolicy) -> None:
        self.durable = durable

    async def GetTopologyHints(self, request, context):
        try:
            r = await self.durable.get_topology_hints(to_request(request))
        except PolicyError as e:
            await _abort(context, e)
        return pb.ResourceHintsResponse(**_echo(request), resource_hints={CPU_RESOURCE: _hints_pb(r.hints)},
                                        labels=r.labels, annotations=r.annotations)

    async def Allocate(self, request, context):
        try:
            r = await self.durable.allocate(to_request(request))
        except PolicyError as e:
            await _abort(context, e)
        return _alloc_response(request, r)

    async def RemovePod(self, request, context):
        if not request.pod_uid:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "pod_uid is empty")
        check_name("pod_uid", request.pod_uid)
        try:
            await self.durable.release_pod(request.pod_uid)
        except PolicyError as e:  # state not persisted: UNAVAILABLE, nothing removed
            await _abort(context, e)
        return pb.RemovePodResponse()

    async def GetResourcesAllocation(self, request, context):
        resp = pb.GetResourcesAllocationResponse()
        for a in await self.durable.resources_allocation():
            cr = resp.pod_resources[a.pod_uid].container_resources[a.container_name]
            cr.resource_allocation[CPU_RESOURCE].CopyFrom(_info(a))
        return resp

    async def GetTopologyAwareResources(self, request, context):
        check_name("pod_uid", request.pod_uid)
        check_name("container_name", request.container_name)
        try:
            a = self.durable.policy.container(request.pod_uid, request.container_name)
        except PolicyError as e:
            await _abort(context, e)
        res = pb.TopologyAwareResource(is_node_resource=False, is_scalar_resource=True)
        if not a.is_sidecar:
            per = self.durable.policy.assignments(a.cpuset)
            res.aggregated_quantity = res.original_aggregated_quantity = float(len(a.cpuset))
            for lst in (res.topology_aware_quantity_list, res.original_topology_aware_quantity_list):
                lst.extend(pb.TopologyAwareQuantity(resource_value=float(len(c)), node=n) for n, c in per.items())
        return pb.GetTopologyAwareResourcesResponse(
            pod_uid=a.pod_uid,
            pod_name=a.pod_name,
            pod_namespace=a.pod_namespace,
            container_topology_aware_resources=pb.ContainerTopologyAwareResources(
                container_name=a.container_name, allocated_resources={CPU_RESOURCE: res}
            ),
        )

    async def GetTopologyAwareAllocatableResources(self, request, context):
        cap, alloc = self.durable.policy.allocatable()
        r = pb.AllocatableTopologyAwareResource(
            is_node_resource=False,
            is_scalar_resource=True,
            aggregated_allocatable_quantity=float(sum(alloc.values())),
            aggregated_capacity_quantity=float(sum(cap.values())),
            topology_aware_allocatable_quantity_list=[
                pb.TopologyAwareQuantity(resource_value=float(v), node=n) for n, v in sorted(alloc.items())
            ],
            topology_aware_capacity_quantity_list=[
                pb.TopologyAwareQuantity(resource_value=float(v), node=n) for n, v in sorted(cap.items())
            ],
        )
        return pb.GetTopologyAwareAllocatableResourcesResponse(allocatable_resources={CPU_RESOURCE: r})

    async def GetResourcePluginOptions(self, request, context):
        return pb.ResourcePluginOptions(**self.durable.policy.options_dict())

    async def PreStartContainer(self, request, context):
        return pb.PreStartContainerResponse()

    async def GetPodTopologyHints(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "pod-level hints are not implemented by the cpu plugin")

    async def AllocateForPod(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "pod-level allocation is not implemented by the cpu plugin")


class RegistrationServicer(reg_grpc.RegistrationServicer):
    """kubelet plugin-watcher handshake (pluginregistration v1) of a ResourcePlugin
    for ``name`` (the CPU plugin's, and the memory plugin's: agent.memory.qrm)."""

    def __init__(self, endpoint: str, name: str = CPU_RESOURCE) -> None:
        self.endpoint = endpoint
        self.name = name
        self.registered: bool | None = None
        self.error = ""

    async def GetInfo(self, request, context):
        return reg_pb.PluginInfo(
            type=PLUGIN_TYPE, name=self.name, endpoint=self.endpoint, supported_versions=[API_VERSION]
        )

    async def NotifyRegistrationStatus(self, request, context):
        self.registered = request.plugin_registered
        self.error = request.error
        if request.plugin_registered:
            log.info("plugin registered", name=self.name, endpoint=self.endpoint)
        else:
            log.error("plugin registration failed", name=self.name, error=shown(request.error, 512))
        return reg_pb.RegistrationStatusResponse()


async def serve(durable: DurablePolicy, socket_path: Path) -> tuple[grpc.aio.Server, RegistrationServicer]:
    server = new_server("resourceplugin")
    pb_grpc.add_ResourcePluginServicer_to_server(ResourcePluginServicer(durable), server)
    reg = RegistrationServicer(str(socket_path))
    reg_grpc.add_RegistrationServicer_to_server(reg, server)
    await serve_unix(server, socket_path)
    return server, reg
