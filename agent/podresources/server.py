"""PodResourcesLister v1 (List, GetAllocatableResources, Get) over hwagent's state.

Devices come from the device manager (``DeviceAllocations``), exclusive CPU ids
from the CPU policy (``CPUAllocations``) when it is running, memory blocks from
the memory manager (``MemoryAllocations``), the pod list from admission's
registry, the pod directory (``POD_DIRECTORY``: the pods another front names, the
NRI runtime's, with their containers even where they hold nothing) and the
active-pods source: the kubelet's
``DevicesProvider``/``CPUsProvider``/``MemoryProvider``/``PodsProvider``. Each is a reference
resolved per request (``Deferred``): the server starts with the device manager,
before the components that publish the others. Like
the kubelet, every device is reported as its own ContainerDevices entry, once
per NUMA node it is attached to (without topology when it has none); each
memory block is one ContainerMemory entry whose topology names every node of the
block, and allocatable memory is one entry per NUMA node and resource with
anything allocatable (the kubelet's memory manager shapes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import grpc

from agent.api.podresources.v1 import api_pb2 as pr
from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc
from agent.contracts import (
    ActivePods,
    CPUAllocations,
    Deferred,
    DeviceAllocations,
    MemoryAllocations,
    PodDirectorySource,
    WorkloadRegistry,
)
from agent.contracts.dra import PodClaims
from agent.contracts.memory import MemoryBlock
from agent.contracts.pods import PodSpec
from agent.eventlog import get_logger
from agent.podresources.metrics import POD_RESOURCES_ERRORS, POD_RESOURCES_REQUESTS
from agent.limits import LimitError, check_name

log = get_logger("hwagent.podresources")
API_VERSION = "v1"


def container_devices(resource: str, devices: Iterable[tuple[str, tuple[int, ...]]]) -> list[pr.ContainerDevices]:
    out = []
    for dev, nodes in devices:
        if not nodes:
            out.append(pr.ContainerDevices(resource_name=resource, device_ids=[dev]))
        for n in nodes:
            out.append(
                pr.ContainerDevices(
                    resource_name=resource, device_ids=[dev], topology=pr.TopologyInfo(nodes=[pr.NUMANode(ID=n)])
                )
            )
    return out


def container_memory(blocks: Iterable[MemoryBlock]) -> list[pr.ContainerMemory]:
    """One entry per block, in the manager's order; a block spread over nodes names them all."""
    return [
        pr.ContainerMemory(memory_type=b.resource, size=b.size,
                           topology=pr.TopologyInfo(nodes=[pr.NUMANode(ID=n) for n in b.numa_nodes]))
        for b in blocks
    ]


@dataclass
class _Pod:
    uid: str
    name: str = ""
    namespace: str = ""
    containers: dict[str, pr.ContainerResources] = field(default_factory=dict)

    def container(self, name: str) -> pr.ContainerResources:
        c = self.containers.get(name)
        if c is None:
            c = self.containers[name] = pr.ContainerResources(name=name)
        return c


def add_dynamic_resources(p: _Pod, spec: PodSpec, claims: PodClaims) -> None:
    """Each app container's DRA claims (standalone), in the kubelet's DynamicResource shape:
    the ResourceClaim, and per prepared device its driver, pool, name and CDI ids."""
    held = claims.pod_claims(spec.uid)
    for c in spec.containers:
        for pod_claim in c.resources.claims:
            found = held.get(spec.resource_claims.get(pod_claim, ""))
            if found is None:
                continue
            ref, devices = found
            p.container(c.name).dynamic_resources.append(pr.DynamicResource(
                claim_name=ref.name, claim_namespace=ref.namespace,
                claim_resources=[pr.ClaimResource(
                    cdi_devices=[pr.CDIDevice(name=i) for i in d.cdi_device_ids], driver_name=claims.driver_name,
                    pool_name=d.pool, device_name=d.device) for d in devices]))


def add_directory_pods(pod: Callable[[str, str, str], _Pod], directory: PodDirectorySource | None) -> None:
    """The pods another front names by their sandbox's metadata (the NRI runtime's), each app
    container listed even where it holds nothing; a pod's sandbox is no container of the API. A
    front's workloads that are no pods (Slurm's steps) are not active pods: the caller's filter
    leaves them out."""
    for ident in directory.current.containers if directory is not None else ():
        p = pod(ident.pod_uid, ident.pod, ident.namespace)
        if ident.container:
            p.container(ident.container)


class PodResourcesServicer(pr_grpc.PodResourcesListerServicer):
    """Reads its providers at request time (they may start after this server)."""

    def __init__(
        self,
        *,
        devices: Deferred[DeviceAllocations] = lambda: None,
        cpus: Deferred[CPUAllocations] = lambda: None,
        workloads: Deferred[WorkloadRegistry] = lambda: None,
        active_pods: Deferred[ActivePods] = lambda: None,
        memory: Deferred[MemoryAllocations] = lambda: None,
        claims: Deferred[PodClaims] = lambda: None,
        directory: Deferred[PodDirectorySource] = lambda: None,
    ) -> None:
        self._claims = claims
        self._directory = directory
        self._devices = devices
        self._cpus = cpus
        self._workloads = workloads
        self._active_pods = active_pods
        self._memory = memory

    def _pods(self) -> dict[str, _Pod]:
        pods: dict[str, _Pod] = {}

        def pod(uid: str, name: str, namespace: str) -> _Pod:
            p = pods.get(uid)
            if p is None:
                p = pods[uid] = _Pod(uid)
            p.name = p.name or name
            p.namespace = p.namespace or namespace
            return p

        dm = self._devices()
        if dm is not None:
            for a in sorted(dm.allocations(), key=lambda a: (a.pod_uid, a.container_name, a.resource)):
                c = pod(a.pod_uid, a.pod_name, a.pod_namespace).container(a.container_name)
                c.devices.extend(container_devices(a.resource, a.devices))
        cpu = self._cpus()
        if cpu is not None:
            for r in cpu.allocations():
                c = pod(r.pod_uid, r.pod_name, r.pod_namespace).container(r.container_name)
                c.cpu_ids.extend(sorted(r.cpuset))
        mem = self._memory()
        if mem is not None:
            for (uid, cname), blocks in sorted(mem.all_blocks().items()):
                if blocks:
                    pod(uid, "", "").container(cname).memory.extend(container_memory(blocks))
        workloads = self._workloads()
        if workloads is not None:
            # standalone admission: every admitted pod and app container, also those holding nothing
            claims = self._claims()
            for ap in workloads.admitted():
                p = pod(ap.uid, ap.spec.name, ap.spec.namespace)
                for spec in ap.spec.containers:
                    p.container(spec.name)
                if claims is not None and ap.spec.resource_claims:
                    add_dynamic_resources(p, ap.spec, claims)
        add_directory_pods(pod, self._directory())
        active = self._active_pods()
        if active is not None:
            uids = active.active_pod_uids()
            pods = {u: p for u, p in pods.items() if u in uids}
        return pods

    @staticmethod
    def _message(p: _Pod) -> pr.PodResources:
        return pr.PodResources(
            name=p.name, namespace=p.namespace, containers=[p.containers[k] for k in sorted(p.containers)]
        )

    async def List(self, request: pr.ListPodResourcesRequest, context) -> pr.ListPodResourcesResponse:
        POD_RESOURCES_REQUESTS.labels(API_VERSION, "list").inc()
        pods = self._pods()
        return pr.ListPodResourcesResponse(
            pod_resources=[self._message(p) for p in sorted(pods.values(), key=lambda p: (p.namespace, p.name, p.uid))]
        )

    async def GetAllocatableResources(self, request, context) -> pr.AllocatableResourcesResponse:
        POD_RESOURCES_REQUESTS.labels(API_VERSION, "get_allocatable").inc()
        resp = pr.AllocatableResourcesResponse()
        cpu = self._cpus()
        if cpu is not None:
            # as the kubelet's static policy: every online CPU but the reserved ones
            resp.cpu_ids.extend(sorted(cpu.allocatable_cpus()))
        dm = self._devices()
        if dm is not None:
            for resource, devices in sorted(dm.allocatable_devices().items()):
                resp.devices.extend(container_devices(resource, ((d.id, d.numa) for d in devices)))
        mem = self._memory()
        if mem is not None:
            # the kubelet's GetAllocatableMemory: per node and resource, nothing for what has none
            resp.memory.extend(container_memory(
                MemoryBlock(n.resource, n.allocatable, (n.node,)) for n in mem.nodes() if n.allocatable > 0))
        return resp

    async def Get(self, request: pr.GetPodResourcesRequest, context) -> pr.GetPodResourcesResponse:
        POD_RESOURCES_REQUESTS.labels(API_VERSION, "get").inc()
        try:
            check_name("pod_name", request.pod_name)
            check_name("pod_namespace", request.pod_namespace)
        except LimitError as e:
            POD_RESOURCES_ERRORS.labels(API_VERSION, "get").inc()
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        for p in self._pods().values():
            if p.name == request.pod_name and p.namespace == request.pod_namespace:
                return pr.GetPodResourcesResponse(pod_resources=self._message(p))
        POD_RESOURCES_ERRORS.labels(API_VERSION, "get").inc()
        await context.abort(
            grpc.StatusCode.NOT_FOUND, f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
        )
        raise AssertionError("unreachable: context.abort raises")
