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
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "MEMORY_RESOURCE",
    "HUGEPAGES_PREFIX",
    "MemoryBlock",
    "NodeMemory",
    "MemoryAllocations",
]

#: the resource name of ordinary memory (pod-resources ``memory_type``, QRM ``ResourceName``)
MEMORY_RESOURCE = "memory"
#: hugepage resources are ``hugepages-<size>``, e.g. ``hugepages-2Mi``, ``hugepages-1Gi``
HUGEPAGES_PREFIX = "hugepages-"


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


class MemoryAllocations(Protocol):
    """What views may ask of the memory manager (read-only)."""

    def blocks(self, pod_uid: str, container: str) -> tuple[MemoryBlock, ...]:
        """The container's memory blocks; empty when the manager does not place it."""

    def all_blocks(self) -> Mapping[tuple[str, str], tuple[MemoryBlock, ...]]:
        """Every placed container's blocks, keyed by (pod UID, container name)."""

    def nodes(self) -> tuple[NodeMemory, ...]:
        """Per-node accounting for every memory resource, ordered by node then resource."""
