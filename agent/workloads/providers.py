"""The topology manager's two hint providers: the CPU policy and the device manager.

Thin adapters: they turn a ``PodSpec`` container into each component's own
request type, convert the components' hints into ``TopologyHint``s, and keep
what each ``allocate`` returned until the admission pipeline builds the
``AdmittedPod`` from it. Each is given the component's contract
(``CPUAllocator`` / ``DeviceAllocator``, looked up when admission starts, after
both), or None when it does not run here: a missing CPU policy gives no CPU
hints and no CPUs (the container runs on every CPU), a missing device manager
refuses any device request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent.contracts import CPUAllocator, DeviceAllocator
from agent.cpu.errors import PolicyError
from agent.cpu.hints import Hint
from agent.cpu.policy import AllocateResult, Request
from agent.cpu.state import INIT as CPU_INIT
from agent.cpu.state import MAIN as CPU_MAIN
from agent.devicemanager.manager import ContainerAllocation, ContainerRequest
from agent.devicemanager.selection import AllocationError
from agent.topologymanager import TopologyHint
from agent.workloads.errors import AdmissionError
from agent.workloads.model import INIT, ContainerSpec, PodSpec

__all__ = ["CPUProvider", "DeviceProvider", "cpu_request", "admission_error_from_policy", "CPU_RESOURCE"]

CPU_RESOURCE = "cpu"

#: CPU policy refusals that mean "this node cannot do it", not "the manifest is wrong"
_CPU_EXHAUSTED_REASONS = frozenset({"too_many_cpus", "no_hints", "insufficient_cpus", "numa_busy", "no_shared_cpus"})


def admission_error_from_policy(e: PolicyError) -> AdmissionError:
    code = "RESOURCE_EXHAUSTED" if e.reason in _CPU_EXHAUSTED_REASONS else e.code
    return AdmissionError(code, f"cpu: {e.message}", reason=f"cpu_{e.reason}")


def admission_error_from_devices(resource: str | None, e: AllocationError) -> AdmissionError:
    code = {"NOT_FOUND": "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED": "RESOURCE_EXHAUSTED"}.get(e.code, e.code)
    return AdmissionError(code, f"{resource + ': ' if resource else ''}{e}", reason="devices")


def _container(pod: PodSpec, name: str) -> ContainerSpec:
    for c in pod.all_containers():
        if c.name == name:
            return c
    raise KeyError(name)


def cpu_request(pod: PodSpec, c: ContainerSpec, hint: Hint | None = None, milli: int | None = None) -> Request:
    """The QRM request for one container: the pod's Katalyst annotations carry the QoS."""
    cpu_milli = c.resources.cpu_request_milli if milli is None else milli
    return Request(
        pod_uid=pod.uid,
        container_name=c.name,
        pod_namespace=pod.namespace,
        pod_name=pod.name,
        container_type=CPU_INIT if c.kind == INIT else CPU_MAIN,
        container_index=[x.name for x in pod.all_containers()].index(c.name),
        hint=hint,
        resource_requests={"cpu": (cpu_milli or 0) / 1000.0},
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
    )


def _to_tm(hints: Sequence[Any] | None) -> list[TopologyHint] | None:
    if hints is None:
        return None
    return [TopologyHint(frozenset(h.nodes), bool(h.preferred)) for h in hints]


class CPUProvider:
    """The CPU policy as a hint provider (``resource "cpu"``)."""

    name = "cpu"

    def __init__(self, policy: CPUAllocator | None) -> None:
        self._policy = policy
        #: pod uid -> container -> what allocate returned
        self.results: dict[str, dict[str, AllocateResult]] = {}

    def _svc(self) -> CPUAllocator | None:
        return self._policy

    async def _hints(self, req: Request) -> list[Hint] | None:
        svc = self._svc()
        if svc is None:
            return None
        try:
            return (await svc.get_topology_hints(req)).hints
        except PolicyError as e:
            if e.reason == "no_hints":
                return []  # possible in principle, impossible now: let the topology manager say which masks
            raise admission_error_from_policy(e) from None

    async def container_hints(self, pod: PodSpec, container: str) -> Mapping[str, Sequence[TopologyHint] | None]:
        c = _container(pod, container)
        if c.kind == INIT:
            # the policy gives init containers no hints and no cpus (they run on the shared
            # pool); asking would only apply the app containers' QoS checks to them
            return {CPU_RESOURCE: None}
        hints = await self._hints(cpu_request(pod, c))
        return {CPU_RESOURCE: _to_tm(hints)}

    async def pod_hints(self, pod: PodSpec) -> Mapping[str, Sequence[TopologyHint] | None]:
        """Pod scope: hints for the whole pod's CPUs, asked as one container
        (the larger of the app containers' sum and the largest init container)."""
        apps = sum(c.resources.cpu_request_milli or 0 for c in pod.containers)
        inits = max((c.resources.cpu_request_milli or 0 for c in pod.init_containers), default=0)
        first = pod.containers[0]
        hints = await self._hints(cpu_request(pod, first, milli=max(apps, inits)))
        return {CPU_RESOURCE: _to_tm(hints)}

    async def allocate(self, pod: PodSpec, container: str, hint: TopologyHint) -> None:
        svc = self._svc()
        if svc is None:
            return
        c = _container(pod, container)
        if c.kind == INIT:
            return
        req = cpu_request(pod, c)
        chosen = await self._choose_hint(req, hint.affinity if hint is not None else None)
        try:
            res = await svc.allocate(cpu_request(pod, c, hint=chosen))
        except PolicyError as e:
            raise admission_error_from_policy(e) from None
        self.results.setdefault(pod.uid, {})[container] = res

    async def _choose_hint(self, req: Request, affinity: frozenset[int] | None) -> Hint | None:
        """The CPU hint to allocate with: the merged affinity, narrowed to a mask the
        policy itself offered when it offered any (a non-exclusive NUMA-bound
        container needs exactly one node; policy "none" merges to no affinity at all)."""
        own = await self._hints(req)
        if not own:
            return None if affinity is None else Hint(tuple(sorted(affinity)), True)
        fitting = [h for h in own if affinity is None or set(h.nodes) <= affinity]
        if not fitting:
            return Hint(tuple(sorted(affinity)), False) if affinity is not None else None
        best = next((h for h in fitting if h.preferred), fitting[0])
        return best

    async def release(self, pod: PodSpec) -> None:
        self.results.pop(pod.uid, None)
        svc = self._svc()
        if svc is not None:
            await release_cpus(svc, pod.uid)


async def release_cpus(svc: CPUAllocator, uid: str) -> None:
    """RemovePod, persisted before returning."""
    await svc.release_pod(uid)


class DeviceProvider:
    """The device manager as a hint provider (one resource per extended resource)."""

    name = "devices"

    def __init__(self, manager: DeviceAllocator | None) -> None:
        self._manager = manager
        self.results: dict[str, dict[str, ContainerAllocation]] = {}

    def _dm(self) -> DeviceAllocator | None:
        return self._manager

    async def container_hints(self, pod: PodSpec, container: str) -> Mapping[str, Sequence[TopologyHint] | None]:
        dm = self._dm()
        c = _container(pod, container)
        if dm is None or not c.resources.extended:
            return {}
        hints = dm.topology_hints(pod.uid, c.name, dict(c.resources.extended))
        return {r: _to_tm(h) for r, h in hints.items()}

    async def pod_hints(self, pod: PodSpec) -> Mapping[str, Sequence[TopologyHint] | None]:
        dm = self._dm()
        if dm is None:
            return {}
        total: dict[str, int] = {}
        for c in pod.containers:
            for r, n in c.resources.extended.items():
                total[r] = total.get(r, 0) + n
        for c in pod.init_containers:
            for r, n in c.resources.extended.items():
                total[r] = max(total.get(r, 0), n)
        if not total:
            return {}
        hints = dm.pod_topology_hints(pod.uid, total)
        return {r: _to_tm(h) for r, h in hints.items()}

    async def allocate(self, pod: PodSpec, container: str, hint: TopologyHint) -> None:
        dm = self._dm()
        c = _container(pod, container)
        if not c.resources.extended:
            return
        if dm is None:
            raise AdmissionError(
                "RESOURCE_EXHAUSTED",
                f"{', '.join(sorted(c.resources.extended))}: no device manager runs on this node",
                reason="devices",
            )
        req = ContainerRequest(
            pod_uid=pod.uid,
            container_name=c.name,
            resources=dict(c.resources.extended),
            pod_namespace=pod.namespace,
            pod_name=pod.name,
            container_type="init" if c.kind == INIT else "app",
            hint=hint.affinity if hint is not None else None,
        )
        try:
            alloc = await dm.allocate(req)
        except AllocationError as e:
            raise admission_error_from_devices(None, e) from None
        self.results.setdefault(pod.uid, {})[container] = alloc

    async def release(self, pod: PodSpec) -> None:
        self.results.pop(pod.uid, None)
        dm = self._dm()
        if dm is not None:
            dm.release_pod(pod.uid)
            await dm.flush_checkpoint()
