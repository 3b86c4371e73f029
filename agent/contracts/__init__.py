"""What components promise each other, as small Protocols, and the typed keys they are published under.

Components do not reach into each other's classes; each depends on the
narrowest interface that serves it, named here, so the coupling between them is
visible in imports and checked by mypy (as the kubelet's container manager hands
its managers small interfaces: devicemanager ``Manager``, podresources
``CPUsProvider``/``DevicesProvider``). A component publishes a handle under a
``HandleKey`` in its start(); a component started later looks it up in its own
start(), in the order of ``agent.daemon.daemon.COMPONENTS``. Where a producer
starts after its consumer (the active-pods source after the device manager and
the CPU policy; the runtime after admission) the consumer holds a
``Deferred``: it answers None until the producer has published, then the
handle. Once every component has started the daemon freezes the context:
publishing after that raises. The contracts and who uses them:

    contract            published by (key)                        used by
    CPUAllocations      cpu (CPU_POLICY)                          pod-resources (deferred), status,
                                                                  pressure, kubelet-pods
    CPUAllocator        cpu (CPU_POLICY: its DurablePolicy)       admission, runtime
    DeviceAllocations   devicemanager (DEVICE_MANAGER)            pod-resources, status
    MemoryAllocations   memory (MEMORY_MANAGER)                   pod-resources (deferred), status (memory
                                                                  view, metrics), describe
    MemoryAllocator     memory (MEMORY_MANAGER)                   admission, runtime, memory plugin
                                                                  (kubelet mode)
    DeviceAllocator     devicemanager (DEVICE_MANAGER)            admission
    DeviceHealth        devices (DEVICE_HEALTH)                   pressure, eviction plugin
    DevicePlugins       devices (DEVICE_PLUGINS)                  status, runtime (managed devices)
    ActivePods          workloads (ACTIVE_PODS)                   device manager and CPU policy and
                                                                  pod-resources (deferred)
    PodDirectorySource  kubelet-pods (POD_DIRECTORY)              pressure, eviction plugin, status
    PressureSignals     pressure (PRESSURE)                       eviction plugin, status, advisor
    SharedPoolSizer     cpu (CPU_SHARED_POOL)                     advisor
    EvictionGate        advisor (EVICTION_GATE)                   pressure (deferred)
    Evictor             runtime (standalone) or katalyst-eviction-  pressure (deferred)
                        plugin (kubelet mode) (EVICTOR)
    EvictionPluginView  katalyst-eviction-plugin (EVICTION_PLUGIN) status
    WorkloadRegistry    workloads (WORKLOADS)                     runtime, pod-resources (deferred)
    PodRuntime          runtime (RUNTIME)                         admission (deferred)

The topology manager's own ``HintProvider`` (``agent.topologymanager``) is what
admission's providers implement over ``CPUAllocator`` and ``DeviceAllocator``.

The admission/runtime pair is the core of standalone mode:

    admission ──AdmittedPod──► PodRuntime.run()
        ▲                           │
        └── PodStatusSink.pod_status_changed(uid, PodStatus) ◄──┘

Admission owns the registry and every resource decision; the runtime owns
processes and their cgroups and never allocates or releases anything itself:
when a pod reaches a terminal phase it says so, and admission releases the
pod's CPUs and devices.

The values in the signatures (allocation records, hints, requests, pod status,
plugin states) live in this package's own modules, below every owner, so a
consumer depends on the contract and never on a producer's package
(tests/unit/test_contracts.py checks it).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agent.contracts.component import Component, ComponentFactory, DaemonContext, Deferred, HandleKey
from agent.cpuset import CPUSet

#: The values the contracts below name, by module: imported when first asked for
#: (``from agent.contracts import X`` or ``agent.contracts.X``), not with the package.
#: The package loaded every contract module (and the device plugin's protobuf
#: classes with ``devices``): 45-58 ms of ``hwagent run``'s start (issue 24, READY),
#: though each user needs a few; the annotations here are strings, checked by mypy.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("AllocateResult", "AllocationInfo", "HintsResult", "Request"), "cpu"),
    "ClaimPreparer": "dra",
    **dict.fromkeys(("Allocation", "CheckpointData", "ContainerAllocation", "ContainerRequest", "Device",
                     "ResourceDevices"), "devices"),
    "TopologyHint": "hints",
    **dict.fromkeys(("MemoryAllocations", "MemoryAllocator", "MemoryPlanner"), "memory"),
    "Histogram": "hist",
    "Placement": "placement",
    "PluginState": "plugins",
    "PodDirectory": "poddirectory",
    **dict.fromkeys(("AdmittedPod", "PodStatus"), "pods"),
    **dict.fromkeys(("ContainerProcesses", "PodProcesses"), "processes"),
    **dict.fromkeys(("Container", "Eviction"), "pressure"),
}

if TYPE_CHECKING:
    from agent.contracts.cpu import AllocateResult, AllocationInfo, HintsResult, Request
    from agent.contracts.dra import ClaimPreparer
    from agent.contracts.devices import (
        Allocation,
        CheckpointData,
        ContainerAllocation,
        ContainerRequest,
        Device,
        ResourceDevices,
    )
    from agent.contracts.hints import TopologyHint
    from agent.contracts.memory import MemoryAllocations, MemoryAllocator, MemoryPlanner
    from agent.contracts.hist import Histogram
    from agent.contracts.placement import Placement
    from agent.contracts.plugins import PluginState
    from agent.contracts.poddirectory import PodDirectory
    from agent.contracts.pods import AdmittedPod, PodStatus
    from agent.contracts.processes import ContainerProcesses, PodProcesses
    from agent.contracts.pressure import Container, Eviction
else:
    # hidden from mypy, which would otherwise type every misspelt name as this function's Any

    def __getattr__(name: str) -> Any:
        """A value of ``_LAZY``, its module imported on first use and the name kept here."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value


__all__ = [
    "Component",
    "ContainerProcesses",
    "PodProcesses",
    "ComponentFactory",
    "DaemonContext",
    "HandleKey",
    "Deferred",
    "Placement",
    "PluginState",
    "CPUAllocations",
    "CPUAllocator",
    "CPUPlanner",
    "DevicePlanner",
    "DeviceAllocations",
    "DeviceAllocator",
    "DeviceHealth",
    "DevicePlugins",
    "ActivePods",
    "PodDirectorySource",
    "PressureSignals",
    "EvictionGate",
    "SharedPoolSizer",
    "CPU_SHARED_POOL",
    "EVICTION_GATE",
    "EvictionPluginView",
    "Evictor",
    "PodStatusSink",
    "WorkloadRegistry",
    "PodRuntime",
    "CPU_POLICY",
    "DEVICE_MANAGER",
    "DEVICE_HEALTH",
    "DEVICE_PLUGINS",
    "ACTIVE_PODS",
    "POD_DIRECTORY",
    "PRESSURE",
    "EVICTION_PLUGIN",
    "EVICTOR",
    "WORKLOADS",
    "RUNTIME",
    "MEMORY_MANAGER",
    "DRA_DRIVER",
    "MemoryAllocations",
    "MemoryAllocator",
    "MemoryPlanner",
    "ClaimPreparer",
]

# --- the CPU policy ------------------------------------------------------------------------


class CPUAllocations(Protocol):
    """What readers ask of the CPU policy (the kubelet's podresources ``CPUsProvider``)."""

    def allocations(self) -> list[AllocationInfo]:
        """Every container the policy holds, with its cpuset, pool and QoS."""

    def allocatable_cpus(self) -> CPUSet:
        """Every online CPU but the reserved ones (what pod-resources reports allocatable)."""

    def placement(self, pod_uid: str, container: str) -> Placement | None:
        """The CPUs (and memory nodes) a container has now, read when a view answers
        (ps, describe, pod-resources, the cgroup); None when the policy holds nothing of it."""

    def pools(self) -> dict[str, CPUSet]:
        """Every pool's CPUs now (share, reserve, reclaim, named pools)."""

    def shared_cpus(self) -> CPUSet:
        """Where a container without CPUs of its own (an init container) runs now."""

    def free_per_numa(self) -> dict[int, int]:
        """Dedicatable CPUs per NUMA node now (not held by NUMA-bound containers, reserved excluded)."""

    def numa_of(self) -> Mapping[int, int]:
        """CPU id -> its NUMA node, for the machine the policy runs on."""


class CPUPlanner(Protocol):
    """The CPU policy's state copied for one admission decision: hints and placements
    on the copy, each recorded so the pod's next container sees it, nothing live changed."""

    def hints(self, req: Request) -> list[TopologyHint] | None:
        """The policy's hints on the copy; None = no NUMA preference."""

    def allocate(self, req: Request) -> AllocateResult:
        """What the policy's allocate would give, recorded in the copy only."""

    def shared_cpus(self) -> CPUSet:
        """``CPUAllocations.shared_cpus`` in the copy."""


class CPUAllocator(CPUAllocations, Protocol):
    """What admission, the runtime and eviction ask of the CPU policy (persisted before returning)."""

    async def get_topology_hints(self, req: Request) -> HintsResult: ...

    def plan(self) -> CPUPlanner:
        """A private copy of the policy's state to decide a pod on (admission's decision, dry run)."""

    async def allocate(self, req: Request) -> AllocateResult: ...

    async def release_pod(self, pod_uid: str) -> bool:
        """RemovePod, with the checkpoint written before it returns."""

    async def bind_cgroup(self, pod_uid: str, container: str, cgroup_path: str | None) -> bool:
        """Which cgroup a container runs in, said before its process joins it; the path is
        checked (ValueError) before anything changes. A container the policy holds nothing
        of in a pod it holds (an init container) follows the shared pool. True once the
        policy's enforcer has written the cgroup's cpuset files, which it alone writes from
        then on; False when it enforces no cgroups, and the launcher writes ``placement``."""


# --- the device-plugin host ----------------------------------------------------------------


class DeviceAllocations(Protocol):
    """What readers ask of the device manager (the kubelet's podresources ``DevicesProvider``)."""

    def allocations(self) -> list[Allocation]:
        """Committed allocations, one per container and resource."""

    def container_allocations(self, pod_uid: str) -> dict[str, list[Allocation]]: ...

    def allocatable_devices(self) -> dict[str, list[Device]]:
        """Healthy devices per resource."""

    def capacity(self) -> tuple[dict[str, int], dict[str, int], list[str]]:
        """(capacity, allocatable, deleted resources), as the kubelet's GetCapacity."""

    def resources(self) -> dict[str, ResourceDevices]: ...

    def snapshot(self) -> CheckpointData:
        """Everything the checkpoint would hold now (the ``resources`` view)."""


class DevicePlanner(Protocol):
    """The device manager's allocation table copied for one admission decision."""

    def hints(
        self, pod_uid: str, container_name: str | None, requests: Mapping[str, int]
    ) -> dict[str, list[TopologyHint] | None]:
        """A container's hints (None: the whole pod's) on the copy."""

    async def allocate(self, req: ContainerRequest) -> ContainerAllocation:
        """What the manager's allocate would give, recorded in the copy only."""


class DeviceAllocator(DeviceAllocations, Protocol):
    """What admission and eviction ask of the device manager (devicemanager/types.go ``Manager``)."""

    def topology_hints(
        self, pod_uid: str, container_name: str, requests: Mapping[str, int]
    ) -> dict[str, list[TopologyHint] | None]: ...

    def pod_topology_hints(self, pod_uid: str, requests: Mapping[str, int]) -> dict[str, list[TopologyHint] | None]: ...

    def plan(self, pod_uid: str) -> DevicePlanner:
        """A private copy of the allocation table to decide ``pod_uid`` on (admission's decision, dry run)."""

    async def allocate(self, req: ContainerRequest) -> ContainerAllocation: ...

    async def pre_start(self, pod_uid: str, container_name: str) -> None: ...

    def release_pod(self, pod_uid: str) -> None: ...

    async def flush_checkpoint(self) -> None: ...


# --- the built-in device plugins -------------------------------------------------------------


class DeviceHealth(Protocol):
    """The device-health board: probe verdicts joined with the plugins' own health."""

    def set_health_for(self, kind: str, key: str, healthy: bool, reason: str, source: str) -> list[str]:
        """Mark what a probe saw (a PCI address, a block or net device); returns the device ids affected."""

    def health_of(self, dev_id: str) -> tuple[bool, str]:
        """(healthy, why not) of one device id."""

    def targets(self, kind: str, key: str) -> list[tuple[str, str]]:
        """(resource, device id) pairs a probe key stands for."""


class DevicePlugins(Protocol):
    """The built-in plugins as values (status, kubelet mode); the servers and registrars stay with their owner."""

    def plugin_states(self) -> Sequence[PluginState]:
        """Each live plugin (socket, devices and their health, registration), by resource, read when asked."""

    def dra_states(self) -> Sequence[PluginState]:
        """The resources offered through DRA (no plugin serves them; no socket, not registered) with
        their devices' health, by resource: the DRA health stream's source."""

    def device_nodes(self) -> Sequence[str]:
        """Host paths of the nodes of every device the rules offer (any API, healthy or not): the
        runtime's managed devices, denied to every container that was not given them."""


# --- pods ------------------------------------------------------------------------------------


@runtime_checkable
class ActivePods(Protocol):
    def active_pod_uids(self) -> frozenset[str]:
        """UIDs of pods that still exist and are not terminated."""


class PodDirectorySource(Protocol):
    """Kubelet mode: who runs in which cgroup and holds which device, refreshed by its owner."""

    @property
    def current(self) -> PodDirectory: ...

    @property
    def last_error(self) -> str: ...

    def containers_for_pressure(self) -> list[Container]: ...


# --- pressure and eviction -------------------------------------------------------------------


class PressureSignals(Protocol):
    """What the eviction plugin and status read of the pressure engine."""

    @property
    def containers(self) -> list[Container]: ...

    @property
    def last_runqueue(self) -> dict[str, Histogram]: ...

    def recent_evictions(self) -> list[dict[str, Any]]:
        """The last evictions, oldest first, as status shows them."""

    def container_wait_ns(self, by_cgroup: dict[str, Histogram]) -> dict[tuple[str, str], int]: ...

    def container_runqueue(self) -> dict[tuple[str, str], Histogram]:
        """Per watched container (pod uid, container): its run-queue delay counters as last
        read (cumulative; a histogram from the BPF probe, the sum only from schedstat)."""

    def status(self) -> dict[str, tuple[str, str]]:
        """Per probe: (mode, detail)."""

    def pool_pressure(self) -> dict[str, float]:
        """Per CPU pool: its run-queue pressure ratio over the last interval (what
        ``hwagent_pool_cpu_pressure_ratio`` exports; the picture draws it)."""


class EvictionGate(Protocol):
    """Whether the pressure engine's CPU-pressure eviction of a pod of QoS level ``qos``
    ("reclaimed", "shared", ...) may go ahead now: the advisor lets it only for reclaimed
    pods, and only when suppressing them at their floor has not been enough
    (docs/advisor.md). Asked from the pressure engine's worker thread: answers from a
    value the owner swaps on its loop, never blocking."""

    def allows_eviction(self, qos: str) -> bool: ...

    def summary(self) -> str:
        """One line for `hwagent status`: the shared pool's size, the quota, the headroom."""


class SharedPoolSizer(Protocol):
    """The CPU policy's sizing of the default shared pool, for the advisor."""

    def shared_bounds(self) -> tuple[int, int]:
        """(fewest, most) CPUs the shared pool may have now; (0, 0) with no shared pod."""

    def shared_room(self) -> CPUSet:
        """CPUs the shared pool may hold now: neither reserved, dedicated nor another shared pool's."""

    async def resize_shared(self, size: int | None, cpus: CPUSet | None = None) -> bool:
        """At least ``size`` CPUs for the shared pool (None: from requests), carved out of
        ``cpus`` first when given (the advisor's NUMA placement; refused, changing nothing,
        when outside ``shared_room``), journaled before it returns; True when the pools
        changed. The policy's invariants hold: never a reserved or dedicated CPU, never
        below requests, no CPU in two shared pools."""


class Evictor(Protocol):
    """Who acts on a pressure eviction: the runtime in standalone mode, the Katalyst
    eviction plugin in kubelet mode. The pressure engine decides and records; it
    looks this up for every eviction and never releases anything itself: a pod's
    CPUs and devices are released by the registry's owner of the pod (admission)
    when the pod ends, so its status, CPUs and devices go together."""

    #: what the eviction record says acted ("runtime", "katalyst")
    name: str

    def accepting(self) -> bool:
        """Whether it acts now (the eviction plugin: while Katalyst holds its
        registration); when not, pressure reports the eviction (record, hook)."""

    def execute(self, ev: Eviction, cgroup_paths: list[str]) -> dict[str, Any]:
        """Begin the eviction; called from a worker thread, so it hands anything that
        changes a component's state to the daemon's loop. Returns what was done (the record's outcome)."""


class EvictionPluginView(Protocol):
    """Kubelet mode: the Katalyst eviction plugin, as status shows it."""

    @property
    def socket_path(self) -> Path: ...

    @property
    def registered(self) -> bool | None: ...

    @property
    def registration_error(self) -> str: ...

    @property
    def recent(self) -> Sequence[dict[str, Any]]: ...


# --- admission and the runtime ---------------------------------------------------------------


class PodStatusSink(Protocol):
    async def pod_status_changed(self, uid: str, status: PodStatus) -> None:
        """Record a pod's new status (persisted before returning). A terminal
        phase makes the owner release the pod's CPUs and devices."""


class WorkloadRegistry(ActivePods, PodStatusSink, Protocol):
    """What the runtime (and eviction) may ask of the admitted pods."""

    def get(self, uid: str) -> AdmittedPod | None:
        """The admitted pod with this UID, or None."""

    def admitted(self) -> Sequence[AdmittedPod]:
        """Every admitted pod whose phase is not terminal, in admission order."""

    def status(self, uid: str) -> PodStatus | None:
        """The last recorded status of a pod."""

    def listed(self) -> Sequence[AdmittedPod]:
        """Every pod in the registry, ended ones included: what `hwagent ps` lists (status counts them)."""


class PodRuntime(Protocol):
    """Runs admitted pods as process trees in their own cgroups."""

    async def run(self, pod: AdmittedPod) -> None:
        """Create the pod's cgroups and start it; returns once its first
        container started or failed to (the failure is a status, not an exception)."""

    async def stop(self, uid: str, grace_s: float | None = None, reason: str = "Stopped") -> None:
        """SIGTERM, wait the grace period (the pod's own when None), kill the
        cgroup, remove it; the pod ends in a terminal phase with ``reason``."""

    async def evict(self, uid: str, message: str) -> None:
        """``stop`` with reason "Evicted" and the evidence in ``message``."""

    async def restore(self, pods: Sequence[AdmittedPod]) -> None:
        """At start: re-attach to the containers of pods that were running,
        record exits that happened while hwagent was down, re-apply drifted settings."""

    def owns_cgroup(self, rel_path: str) -> bool:
        """Whether a cgroup path (relative to a controller root) is one of the runtime's."""

    def signal(self, uid: str, containers: Sequence[str], sig: int) -> dict[str, tuple[int, ...]]:
        """Send ``sig`` to every process in each named container's cgroup (``cgroup.procs``,
        read now); the pids signalled per container (none: nothing of it runs)."""

    def processes(self, uid: str) -> PodProcesses | None:
        """The pod's cgroups and each container's pids, read now; None for a pod not run here."""


# --- the keys, in start order ------------------------------------------------------------------

#: agent.devicemanager.component (standalone)
DEVICE_MANAGER: HandleKey[DeviceAllocator] = HandleKey("devicemanager")
#: agent.deviceplugin.component
DEVICE_HEALTH: HandleKey[DeviceHealth] = HandleKey("device_health")
DEVICE_PLUGINS: HandleKey[DevicePlugins] = HandleKey("deviceplugins")
#: agent.cpu.component
CPU_POLICY: HandleKey[CPUAllocator] = HandleKey("cpu_policy")
#: agent.cpu.component: the same durable policy, as the advisor's sizer of the shared pool
CPU_SHARED_POOL: HandleKey[SharedPoolSizer] = HandleKey("cpu_shared_pool")
#: agent.workloads.component (standalone): the registry, also as the active-pods source
WORKLOADS: HandleKey[WorkloadRegistry] = HandleKey("workloads")
ACTIVE_PODS: HandleKey[ActivePods] = HandleKey("active_pods")
#: agent.kubelet.component (kubelet mode)
POD_DIRECTORY: HandleKey[PodDirectorySource] = HandleKey("pod_directory")
#: agent.pressure.component
PRESSURE: HandleKey[PressureSignals] = HandleKey("pressure")
#: agent.runtime.component (standalone)
RUNTIME: HandleKey[PodRuntime] = HandleKey("runtime")
#: agent.kubelet.evictionplugin (kubelet mode)
EVICTION_PLUGIN: HandleKey[EvictionPluginView] = HandleKey("eviction_plugin")
#: agent.runtime.component (standalone) or agent.kubelet.evictionplugin (kubelet mode)
EVICTOR: HandleKey[Evictor] = HandleKey("evictor")
#: agent.advisor.component (when [advisor] is on)
EVICTION_GATE: HandleKey[EvictionGate] = HandleKey("eviction_gate")
#: agent.memory.component (the memory manager)
MEMORY_MANAGER: HandleKey[MemoryAllocator] = HandleKey("memory_manager")
#: agent.dra.component (the DRA driver, both modes)
DRA_DRIVER: HandleKey[ClaimPreparer] = HandleKey("dra")
