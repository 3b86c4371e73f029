"""Where a container's CPUs are now, as a value: the answer every view reads.

The CPU policy owns which CPUs a container has; a shared container's set moves
whenever a dedicated one comes or goes. Views (``hwagent ps``/``describe``,
pod-resources, status, the cgroup's ``cpuset.cpus``) ask the policy for a
``Placement`` (``CPUAllocations.placement``) when they answer instead of keeping
a copy, so they cannot go stale. Memory nodes follow the CPUs of a NUMA-bound
container (binding CPUs without memory is half a binding), unless the memory
manager placed its memory: then they are its memory blocks' nodes
(``MemoryAllocations.blocks``), which the CPU policy's enforcer writes and
admission's assignment carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.cpuset import CPUSet

__all__ = ["Placement", "memory_nodes", "placement_of"]


@dataclass(frozen=True)
class Placement:
    cpus: CPUSet
    #: cpuset.mems of a NUMA-bound container; None = every memory node the workload root allows
    mems: CPUSet | None = None


def memory_nodes(cpus: CPUSet, numa_of: Mapping[int, int]) -> CPUSet:
    """The NUMA nodes of ``cpus`` (CPUs the topology does not know are left out)."""
    return CPUSet({numa_of[i] for i in cpus if i in numa_of})


def placement_of(cpus: CPUSet, numa_binding: bool, numa_of: Mapping[int, int]) -> Placement:
    """A container's placement from its CPUs: memory nodes only when it is NUMA-bound."""
    return Placement(cpus, memory_nodes(cpus, numa_of) if numa_binding and cpus else None)
