"""Topology: the machine's CPUs, cores, caches and NUMA nodes."""

from agent.topology.model import CPU, Cache, Core, NUMANode, Topology, synthetic

__all__ = ["CPU", "Cache", "Core", "NUMANode", "Topology", "synthetic"]
