"""The memory manager's values that cross components: a container's memory
blocks (how much of which memory resource, on which NUMA nodes) and the
per-node accounting every view shows.

The memory manager (``agent.memory``) owns which NUMA nodes a container's
memory and hugepages come from; pod-resources, ``describe``, the picture,
metrics and the cgroup writers ask it through ``MemoryAllocations`` and never
keep a copy (one owner per fact, as for CPUs in ``placement``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from agent.contracts.hints import TopologyHint

__all__ = [
    "MEMORY_RESOURCE",
    "HUGEPAGES_PREFIX",
    "SPREAD_ANNOTATION",
    "MemoryBlock",
    "NodeMemory",
    "MemoryRequest",
    "MemoryRefused",
    "MemoryAllocations",
    "MemoryPlanner",
    "MemoryAllocator",
]

#: the resource name of ordinary memory (pod-resources ``memory_type``, QRM ``ResourceName``)
MEMORY_RESOURCE = "memory"
#: hugepage resources are ``hugepages-<size>``, e.g. ``hugepages-2Mi``, ``hugepages-1Gi``
HUGEPAGES_PREFIX = "hugepages-"
#: pod annotation: "true" spreads the pod's hugepages over NUMA nodes (``MemoryRequest.spread_hugepages``)
SPREAD_ANNOTATION = "hwagent.io/hugepages-spread"


@dataclass(frozen=True)
class MemoryBlock:
    """One resource's share of a container: ``size`` bytes of ``resource``
    (``memory`` or ``hugepages-<size>``) taken from ``numa_nodes`` (the
    affinity; more than one node when one node was not enough, or when the pod
    asked for its pages to be spread). ``per_node`` is the split, when known:
    node -> bytes, summing to ``size``."""

    resource: str
    size: int
    numa_nodes: tuple[int, ...]
    per_node: tuple[tuple[int, int], ...] = ()

    def split(self) -> dict[int, int]:
        """node -> bytes as every view shows it: ``per_node``, or the one node's whole
        size; empty for a block over several nodes whose split is not known."""
        if self.per_node:
            return dict(self.per_node)
        return {self.numa_nodes[0]: self.size} if len(self.numa_nodes) == 1 else {}


@dataclass(frozen=True)
class NodeMemory:
    """One NUMA node's accounting for one resource, in bytes."""

    node: int
    resource: str
    total: int
    system_reserved: int
    allocatable: int
    allocated: int

    @property
    def free(self) -> int:
        return self.allocatable - self.allocated


@dataclass(frozen=True)
class MemoryRequest:
    """One container's memory request, as the memory manager sees it.

    ``requests`` maps each memory resource (``memory``, ``hugepages-2Mi``, ...)
    to bytes; limits equal requests (the manifest layer refuses anything else for
    the pods the manager places). ``hint`` is the topology manager's merged
    affinity for an allocation (None for a hints query, or "any"). A request with
    no resources is not placed (``allocate`` returns ``()``)."""

    pod_uid: str
    container_name: str
    requests: Mapping[str, int] = field(default_factory=dict)
    pod_namespace: str = ""
    pod_name: str = ""
    hint: TopologyHint | None = None
    #: spread the hugepages over the nodes of the affinity (``SPREAD_ANNOTATION``)
    spread_hugepages: bool = False


class MemoryRefused(Exception):
    """The manager cannot place a request (too little free on every fitting node,
    an unknown or unconfigured page size). ``reason`` is a short token for
    metrics/events; ``str()`` is the one line for the user, naming per-node free
    amounts. Raised before anything changes.

    ``free``: what the nodes have free of the refused resource, as a person reads it
    (``node 0: 0 × 2 MiB pages``), ending the line; ``detail`` is the line without it, for a
    caller that says what is free itself (admission names every resource the pod asks for)."""

    def __init__(self, reason: str, message: str, free: str = "") -> None:
        full = f"{message}; free per node: {free}" if free else message
        super().__init__(full)
        self.reason = reason
        self.message = full
        self.detail = message


class MemoryAllocations(Protocol):
    """What views may ask of the memory manager (read-only)."""

    def blocks(self, pod_uid: str, container: str) -> tuple[MemoryBlock, ...]:
        """The container's memory blocks; empty when the manager does not place it."""

    def all_blocks(self) -> Mapping[tuple[str, str], tuple[MemoryBlock, ...]]:
        """Every placed container's blocks, keyed by (pod UID, container name)."""

    def nodes(self) -> tuple[NodeMemory, ...]:
        """Per-node accounting for every memory resource, ordered by node then resource."""


class MemoryPlanner(Protocol):
    """The manager's state copied for one admission decision: hints and
    allocations on the copy, each recorded so the pod's next container sees it;
    nothing live changes."""

    def hints(self, req: MemoryRequest) -> list[TopologyHint] | None:
        """Hints for every resource of ``req`` together (the same list for each
        memory resource, as upstream); None = no preference (nothing to place)."""

    def allocate(self, req: MemoryRequest) -> tuple[MemoryBlock, ...]:
        """What ``MemoryAllocator.allocate`` would give, recorded in the copy only
        (MemoryRefused when it cannot)."""


class MemoryAllocator(MemoryAllocations, Protocol):
    """What admission and the runtime ask of the memory manager (persisted before returning)."""

    async def get_topology_hints(self, req: MemoryRequest) -> list[TopologyHint] | None: ...

    def plan(self) -> MemoryPlanner:
        """A private copy of the state to decide a pod on (admission's decision, dry run)."""

    async def allocate(self, req: MemoryRequest) -> tuple[MemoryBlock, ...]:
        """Place ``req`` on ``req.hint``'s nodes and persist it; MemoryRefused, with
        nothing changed, when it cannot. A container already placed gets its blocks back."""

    async def release_pod(self, pod_uid: str) -> bool:
        """Free every block of the pod (persisted before returning); False when it held none."""

    async def refresh(self) -> bool:
        """Read the machine's memory and hugepage pools again now, reconciled as the periodic
        re-read does; True when they changed. Admission asks when a request does not fit: a
        person who just reserved pages (nr_hugepages) expects the next launch to see them."""
