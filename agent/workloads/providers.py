"""The topology manager's two hint providers for one admission decision:
the CPU policy and the device manager, each deciding on a private copy of its
state (a *plan*).

Thin adapters: they turn a ``PodSpec`` container into each component's own
request type, pass on the components' hints (``agent.contracts.TopologyHint``, the one hint type), and place
containers with the components' own pure functions (``DynamicPolicy.plan``,
``DevicePlan.allocate``) on the copy, so the later containers of the pod see
the earlier ones and nothing live changes. What they record per container
(the result and the exact request that produced it) is what admission
commits, and what a dry run shows. Each is given the component's contract
(``CPUAllocator`` / ``DeviceAllocator``) or None when it does not run here: a
missing CPU policy gives no CPU hints and no CPUs (the container runs on every
CPU), a missing device manager refuses any device request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from agent.contracts import CPUAllocator, CPUPlanner, DeviceAllocator, MemoryAllocator
from agent.contracts.dra import PodClaims
from agent.contracts.memory import MEMORY_RESOURCE, SPREAD_ANNOTATION, MemoryBlock, MemoryRefused, MemoryRequest
from agent.cpu.qos import DEDICATED, parse_qos
from agent.cpuset import CPUSet
from agent.cpu.errors import PolicyError
from agent.contracts.cpu import AllocateResult, Request
from agent.contracts.cpu import INIT as CPU_INIT
from agent.contracts.cpu import MAIN as CPU_MAIN
from agent.contracts.devices import ContainerAllocation, ContainerRequest
from agent.devicemanager.selection import AllocationError
from agent.contracts.hints import TopologyHint, format_affinity
from agent.workloads.errors import AdmissionError
from agent.contracts.pods import INIT, ContainerSpec, PodSpec

__all__ = [
    "CPUProvider",
    "DeviceProvider",
    "ClaimProvider",
    "MemoryProvider",
    "cpu_request",
    "memory_managed",
    "memory_request",
    "admission_error_from_memory",
    "admission_error_from_policy",
    "CPU_RESOURCE",
]

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


def cpu_request(pod: PodSpec, c: ContainerSpec, hint: TopologyHint | None = None, milli: int | None = None) -> Request:
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


class CPUProvider:
    """The CPU policy as a hint provider (``resource "cpu"``), deciding on a copy of its state."""

    name = "cpu"

    def __init__(self, policy: CPUAllocator | None) -> None:
        #: the policy's state copied for this decision (None: no CPU policy runs here)
        self._plan: CPUPlanner | None = policy.plan() if policy is not None else None
        #: container -> what the policy's allocate gives it, and the request that gives it
        self.results: dict[str, AllocateResult] = {}
        self.requests: dict[str, Request] = {}

    def _hints(self, req: Request) -> list[TopologyHint] | None:
        """The policy's hints on the plan; [] when it has no placement at all."""
        try:
            return self._hints_or_none(req)
        except PolicyError as e:
            if e.reason == "no_hints":
                return []  # the topology manager says which masks were tried
            raise admission_error_from_policy(e) from None

    def _hints_or_none(self, req: Request) -> list[TopologyHint] | None:
        if self._plan is None:
            return None
        return self._plan.hints(req)

    async def container_hints(self, pod: PodSpec, container: str) -> Mapping[str, Sequence[TopologyHint] | None]:
        c = _container(pod, container)
        if c.kind == INIT:
            # the policy gives init containers no hints and no cpus (they run on the shared
            # pool); asking would only apply the app containers' QoS checks to them
            return {CPU_RESOURCE: None}
        return {CPU_RESOURCE: self._hints(cpu_request(pod, c))}

    async def pod_hints(self, pod: PodSpec) -> Mapping[str, Sequence[TopologyHint] | None]:
        """Pod scope: hints for the whole pod's CPUs, asked as one container
        (the larger of the app containers' sum and the largest init container)."""
        apps = sum(c.resources.cpu_request_milli or 0 for c in pod.containers)
        inits = max((c.resources.cpu_request_milli or 0 for c in pod.init_containers), default=0)
        first = pod.containers[0]
        return {CPU_RESOURCE: self._hints(cpu_request(pod, first, milli=max(apps, inits)))}

    async def place(self, pod: PodSpec, container: str, hint: TopologyHint) -> None:
        plan = self._plan
        if plan is None:
            return
        c = _container(pod, container)
        if c.kind == INIT:
            return
        chosen = self._choose_hint(cpu_request(pod, c), hint.affinity if hint is not None else None, c.name)
        req = cpu_request(pod, c, hint=chosen)
        try:
            res = plan.allocate(req)
        except PolicyError as e:
            raise admission_error_from_policy(e) from None
        self.results[container] = res
        self.requests[container] = req

    def shared_cpus(self) -> CPUSet:
        """Where a container without CPUs of its own runs, in the state the decision reached."""
        return self._plan.shared_cpus() if self._plan is not None else CPUSet()

    def _choose_hint(self, req: Request, affinity: frozenset[int] | None, name: str) -> TopologyHint | None:
        """The CPU hint to allocate with: the merged affinity, narrowed to a mask the
        policy itself offered when it offered any (a non-exclusive NUMA-bound
        container needs exactly one node; policy "none" merges to no affinity at all)."""
        try:
            own = self._hints_or_none(req)
        except PolicyError as e:
            # no NUMA node can take the container now: a full node, not a bad manifest
            raise admission_error_from_policy(e) from None
        if own is None:
            return None if affinity is None else TopologyHint(affinity, True)
        fitting = [h for h in own if affinity is None or (h.affinity or frozenset()) <= affinity]
        if fitting:
            return next((h for h in fitting if h.preferred), fitting[0])
        assert affinity is not None  # every own hint fits "any"
        if len(affinity) > 1 and all(len(h.affinity or ()) == 1 for h in own):
            # a one-node container asked into several nodes none of which can hold it
            raise AdmissionError(
                "RESOURCE_EXHAUSTED",
                f"cpu: container {name!r}: no NUMA node of {format_affinity(affinity)} can hold it "
                f"(the cpu policy offers {', '.join(format_affinity(h.affinity) for h in own)})",
                reason="cpu_insufficient_cpus",
            )
        # the policy's own check says why (too few free cpus, a busy node)
        return TopologyHint(affinity, False)


class DeviceProvider:
    """The device manager as a hint provider (one resource per extended resource),
    deciding on a copy of its allocation table."""

    name = "devices"

    def __init__(self, manager: DeviceAllocator | None, pod_uid: str) -> None:
        self._plan = manager.plan(pod_uid) if manager is not None else None
        #: container -> the devices planned for it (no plugin response yet), and the request to commit them
        self.results: dict[str, ContainerAllocation] = {}
        self.requests: dict[str, ContainerRequest] = {}

    async def container_hints(self, pod: PodSpec, container: str) -> Mapping[str, Sequence[TopologyHint] | None]:
        c = _container(pod, container)
        if self._plan is None or not c.resources.extended:
            return {}
        hints = self._plan.hints(pod.uid, c.name, dict(c.resources.extended))
        return dict(hints)

    async def pod_hints(self, pod: PodSpec) -> Mapping[str, Sequence[TopologyHint] | None]:
        if self._plan is None:
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
        hints = self._plan.hints(pod.uid, None, total)
        return dict(hints)

    async def place(self, pod: PodSpec, container: str, hint: TopologyHint) -> None:
        c = _container(pod, container)
        if not c.resources.extended:
            return
        if self._plan is None:
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
            alloc = await self._plan.allocate(req)
        except AllocationError as e:
            raise admission_error_from_devices(None, e) from None
        self.results[container] = alloc
        # carried out with exactly these devices
        self.requests[container] = replace(req, devices={a.resource: a.device_ids for a in alloc.allocations})


# --- the memory manager ---------------------------------------------------------------------

#: memory manager refusals that are the manifest's fault, not the node's
_MEMORY_INVALID = frozenset({"unknown_resource", "partial_page"})


def admission_error_from_memory(e: MemoryRefused) -> AdmissionError:
    code = "INVALID_ARGUMENT" if e.reason in _MEMORY_INVALID else \
        "UNAVAILABLE" if e.reason == "state_not_persisted" else "RESOURCE_EXHAUSTED"
    def named(text: str) -> str:
        return text if text.startswith(("memory", "hugepages")) else f"memory: {text}"

    return AdmissionError(code, named(str(e)), reason=f"memory_{e.reason}", detail=named(e.detail))


def memory_managed(pod: PodSpec) -> bool:
    """The pods the memory manager places (docs/memory.md): dedicated NUMA-bound
    pods (Katalyst's dedicated_cores + numa_binding, its memory plugin's NUMA
    binding) and any pod that asks for hugepages. Others run on every memory node."""
    if any(c.resources.hugepages for c in pod.all_containers()):
        return True
    try:
        q = parse_qos(pod.annotations, pod.labels)
    except PolicyError:
        return False  # admission's own QoS check refuses it with the reason
    return q.level == DEDICATED and q.numa_binding


def memory_request(pod: PodSpec, c: ContainerSpec, requests: Mapping[str, int] | None = None,
                   hint: TopologyHint | None = None) -> MemoryRequest:
    """The manager's request for one container of a memory-managed pod: its memory
    (the limit, which must equal the request: the kubelet's Guaranteed rule) and hugepages."""
    if requests is None:
        r = c.resources
        if r.memory_request_bytes and r.memory_limit_bytes != r.memory_request_bytes:
            raise AdmissionError(
                "INVALID_ARGUMENT",
                f"memory: container {c.name!r} requests {r.memory_request_bytes} bytes of memory "
                + ("without a limit" if r.memory_limit_bytes is None else f"with a limit of {r.memory_limit_bytes}")
                + "; the memory manager places this pod's memory (NUMA-bound or hugepages): set "
                  "limits.memory equal to requests.memory",
                reason="memory_limit",
            )
        requests = {**({MEMORY_RESOURCE: r.memory_limit_bytes} if r.memory_limit_bytes else {}), **r.hugepages}
    return MemoryRequest(
        pod_uid=pod.uid, container_name=c.name, requests=dict(requests), pod_namespace=pod.namespace,
        pod_name=pod.name, hint=hint, spread_hugepages=pod.annotations.get(SPREAD_ANNOTATION) == "true",
    )


class MemoryProvider:
    """The memory manager as a hint provider (``memory`` and each ``hugepages-<size>``),
    deciding on a copy of its state. Init containers are not placed (they run before
    the app containers, on every memory node of the pod's cgroup)."""

    name = "memory"

    def __init__(self, manager: MemoryAllocator | None) -> None:
        self._plan = manager.plan() if manager is not None else None
        #: container -> the blocks planned for it, and the request that gives them
        self.results: dict[str, tuple[MemoryBlock, ...]] = {}
        self.requests: dict[str, MemoryRequest] = {}

    def _hints(self, req: MemoryRequest) -> Mapping[str, Sequence[TopologyHint] | None]:
        assert self._plan is not None
        try:
            hints = self._plan.hints(req)
        except MemoryRefused as e:
            raise admission_error_from_memory(e) from None
        if hints is None or req.spread_hugepages and set(req.requests) - {MEMORY_RESOURCE} and \
                MEMORY_RESOURCE not in req.requests:
            return {}
        names = [MEMORY_RESOURCE] if req.spread_hugepages else list(req.requests)
        return {r: hints for r in names if r in req.requests}

    async def container_hints(self, pod: PodSpec, container: str) -> Mapping[str, Sequence[TopologyHint] | None]:
        c = _container(pod, container)
        if self._plan is None or c.kind == INIT or not memory_managed(pod):
            return {}
        return self._hints(memory_request(pod, c))

    async def pod_hints(self, pod: PodSpec) -> Mapping[str, Sequence[TopologyHint] | None]:
        if self._plan is None or not memory_managed(pod):
            return {}
        total: dict[str, int] = {}
        for c in pod.containers:
            for r, n in memory_request(pod, c).requests.items():
                total[r] = total.get(r, 0) + n
        if not total:
            return {}
        return self._hints(memory_request(pod, pod.containers[0], requests=total))

    async def place(self, pod: PodSpec, container: str, hint: TopologyHint) -> None:
        c = _container(pod, container)
        if self._plan is None or c.kind == INIT or not memory_managed(pod):
            return
        req = memory_request(pod, c, hint=hint if hint is not None and hint.affinity is not None else None)
        if not req.requests:
            return
        try:
            blocks = self._plan.allocate(req)
        except MemoryRefused as e:
            raise admission_error_from_memory(e) from None
        self.results[container] = blocks
        # committed on exactly the nodes the plan chose (spread pages follow no hint)
        placed = frozenset(n for b in blocks if b.resource == MEMORY_RESOURCE or not req.spread_hugepages
                           for n in b.numa_nodes)
        self.requests[container] = replace(req, hint=TopologyHint(placed, True) if placed else None)


class ClaimProvider:
    """The DRA driver's pod claims as a hint provider (standalone): where a container's
    ResourceClaims not yet allocated could get NUMA-local devices, as one resource
    (``resourceclaims``). A claim is hinted for the first container that uses it; the claims
    are allocated after the decision, preferring the container's merged affinity."""

    name = "dra"
    RESOURCE = "resourceclaims"

    def __init__(self, claims: PodClaims | None, numa_nodes: Sequence[int]) -> None:
        self._claims = claims
        self._nodes = tuple(numa_nodes)
        self._hinted: set[str] = set()

    def _hints(self, pod: PodSpec, names: Sequence[str]) -> Mapping[str, Sequence[TopologyHint] | None]:
        todo = [n for n in dict.fromkeys(names) if n not in self._hinted and n in pod.resource_claims]
        if self._claims is None or not todo:
            return {}
        return {self.RESOURCE: self._claims.hints(pod.namespace, [pod.resource_claims[n] for n in todo], self._nodes)}

    async def container_hints(self, pod: PodSpec, container: str) -> Mapping[str, Sequence[TopologyHint] | None]:
        return self._hints(pod, _container(pod, container).resources.claims)

    async def pod_hints(self, pod: PodSpec) -> Mapping[str, Sequence[TopologyHint] | None]:
        return self._hints(pod, [n for c in pod.all_containers() for n in c.resources.claims])

    async def place(self, pod: PodSpec, container: str, hint: TopologyHint) -> None:
        self._hinted.update(_container(pod, container).resources.claims)
