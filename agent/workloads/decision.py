"""Admission's decision for one pod, computed once for a dry run and an admission alike.

``decide`` asks the topology manager to align and place every container with
the CPU policy's, the device manager's and the memory manager's own functions, each on a private copy
of its state (``providers``), and returns what each container would get. It
changes nothing: an admission then commits exactly the requests the decision
recorded (``PodDecision.cpu.requests``, ``.devices.requests``, under
admission's lock, so the state they were decided on is the state they meet),
and a dry run shows the placement. Since both are the same computation, a dry
run's answer is the admission's, refusals included: the policies' feasibility
checks ("this placement would leave no cpu for the shared_cores containers")
run inside the placement.

``assignments`` turns providers' results into what each container gets; it is
used on the decision's results (a dry run) and on the committed ones (admission).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.contracts import CPUAllocator, DeviceAllocator, MemoryAllocator
from agent.contracts.dra import PodClaims
from agent.topologymanager.manager import HintProvider
from agent.contracts.memory import MemoryBlock
from agent.contracts.placement import placement_of
from agent.cpu.errors import PolicyError
from agent.contracts.cpu import AllocateResult
from agent.cpuset import CPUSet
from agent.contracts.devices import ContainerAllocation
from agent.devicemanager.selection import AllocationError
from agent.topologymanager import TopologyAffinityError, TopologyManager
from agent.contracts.hints import TopologyHint
from agent.workloads.errors import AdmissionError
from agent.contracts.pods import ContainerAssignment, DeviceGrant, DeviceNode, Mount, PodSpec
from agent.workloads.providers import (
    ClaimProvider,
    CPUProvider,
    DeviceProvider,
    MemoryProvider,
    admission_error_from_devices,
    admission_error_from_policy,
)

__all__ = ["PodDecision", "decide", "assignments"]


@dataclass(frozen=True)
class PodDecision:
    """Where every container of ``spec`` goes, and the requests that put it there."""

    spec: PodSpec
    hints: Mapping[str, TopologyHint]
    cpu: CPUProvider
    devices: DeviceProvider
    memory: MemoryProvider
    #: container -> what it would get (no device grants: the plugins' Allocate gives those)
    placement: Mapping[str, ContainerAssignment]


async def decide(
    spec: PodSpec,
    tm: TopologyManager,
    cpu_policy: CPUAllocator | None,
    device_manager: DeviceAllocator | None,
    *,
    count: bool = True,
    memory_manager: MemoryAllocator | None = None,
    pod_claims: PodClaims | None = None,
) -> PodDecision:
    """The decision, or the AdmissionError an admission of ``spec`` would raise now
    (RESOURCE_EXHAUSTED messages without the free summary: the caller adds it)."""
    cpu = CPUProvider(cpu_policy)
    devices = DeviceProvider(device_manager, spec.uid)
    memory = MemoryProvider(memory_manager)
    names = [c.name for c in spec.all_containers()]
    try:
        providers: list[HintProvider[PodSpec]] = [cpu, devices, memory]
        if spec.resource_claims:
            providers.append(ClaimProvider(pod_claims, tm.numa.nodes))
        hints = await tm.decide(spec, names, providers, count=count)
    except TopologyAffinityError as e:
        raise AdmissionError("RESOURCE_EXHAUSTED", str(e), reason="topology_affinity") from None
    except AllocationError as e:
        raise admission_error_from_devices(None, e) from None
    except PolicyError as e:
        raise admission_error_from_policy(e) from None
    numa_of = cpu_policy.numa_of() if cpu_policy is not None else None
    placement = assignments(spec, hints, cpu.results, devices.results, cpu.shared_cpus(), numa_of, memory.results)
    return PodDecision(spec, hints, cpu, devices, memory, placement)


def assignments(
    spec: PodSpec,
    hints: Mapping[str, TopologyHint],
    cpu_results: Mapping[str, AllocateResult],
    dev_results: Mapping[str, ContainerAllocation],
    shared_pool: CPUSet,
    numa_of: Mapping[int, int] | None,
    memory_results: Mapping[str, tuple[MemoryBlock, ...]] | None = None,
) -> dict[str, ContainerAssignment]:
    """Each container's CPUs, memory nodes, NUMA affinity, devices and grant.

    ``shared_pool`` is where shared pods may run after the pod's allocations (the
    plan's for a dry run, the live policy's after a commit): containers without
    CPUs of their own (init containers) get it. ``numa_of`` (CPU -> NUMA node,
    None without a CPU policy) gives a NUMA-bound container its memory nodes; a
    container the memory manager placed (``memory_results``) gets the nodes of its
    memory blocks instead: the memory affinity, which the topology manager aligned
    with the CPUs' (one owner of where memory comes from).
    """
    out: dict[str, ContainerAssignment] = {}
    for c in spec.all_containers():
        res = cpu_results.get(c.name)
        alloc = res.allocation if res is not None else None
        cpus = alloc.cpuset if alloc is not None else shared_pool
        mems = None
        if alloc is not None and numa_of is not None:
            mems = placement_of(alloc.cpuset, alloc.numa_binding, numa_of).mems
        blocks = (memory_results or {}).get(c.name)
        if blocks:
            mems = CPUSet({n for b in blocks for n in b.numa_nodes})
        hint = hints.get(c.name)
        dev = dev_results.get(c.name)
        devices: dict[str, tuple[str, ...]] = {}
        grant = DeviceGrant()
        if dev is not None:
            devices = {a.resource: a.device_ids for a in dev.allocations if a.device_ids}
            grant = _grant(dev.run_options())
        out[c.name] = ContainerAssignment(
            name=c.name,
            cpus=cpus,
            mems=mems,
            numa_affinity=bound_affinity(hint, alloc is not None and alloc.numa_binding, mems),
            devices=devices,
            grant=grant,
        )
    return out


def bound_affinity(hint: TopologyHint | None, numa_bound: bool, mems: CPUSet | None) -> frozenset[int] | None:
    """A container's NUMA affinity as the views show it (pure): the topology manager's merged
    one; without one (policy ``none`` merges none) a NUMA-bound container is bound all the
    same, to the nodes the CPU policy gave it (its memory nodes), and says so: "NUMA
    affinity any" beside "memory nodes 0" read as a contradiction (issue 37 item 9)."""
    if hint is not None and hint.affinity is not None:
        return hint.affinity
    if numa_bound and mems:
        return frozenset(mems)
    return None


def _grant(opts: Any) -> DeviceGrant:
    return DeviceGrant(
        envs=dict(opts.envs),
        mounts=tuple(Mount(mt.container_path, mt.host_path, bool(mt.read_only)) for mt in opts.mounts),
        devices=tuple(DeviceNode(d.container_path, d.host_path, d.permissions or "rw") for d in opts.devices),
        annotations=dict(opts.annotations),
        cdi_devices=tuple(opts.cdi_devices),
    )
