"""Prometheus view of the memory manager, built at scrape time from its handle.

A custom collector, not module-level gauges: the numbers are the manager's
(``MemoryAllocations.nodes``), read when Prometheus asks, so no copy is kept
that could disagree with ``hwagent memory`` or pod-resources. One series per
NUMA node and memory resource (``memory``, ``hugepages-<size>``). The families
are always yielded (empty when no memory manager runs), so a scrape names the
same families on every daemon.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from agent.contracts.memory import MemoryAllocations

__all__ = ["MemoryCollector", "FAMILIES"]

#: family suffix -> (help, the NodeMemory value it carries)
FAMILIES: tuple[tuple[str, str, Callable[[Any], int]], ...] = (
    ("total_bytes", "Memory or hugepages of the NUMA node (MemTotal; configured pages).", lambda n: n.total),
    ("reserved_bytes", "Reserved for the system on the NUMA node.", lambda n: n.system_reserved),
    ("allocatable_bytes", "What the memory manager may place on the NUMA node.", lambda n: n.allocatable),
    ("allocated_bytes", "Placed on the NUMA node by the memory manager.", lambda n: n.allocated),
    ("free_bytes", "Allocatable and not placed on the NUMA node.", lambda n: n.free),
)


class MemoryCollector:
    """Yields ``hwagent_memory_<family>{numa_node,resource}`` and the count of placed containers."""

    def __init__(self, memory: Callable[[], MemoryAllocations | None]) -> None:
        self._memory = memory

    def collect(self) -> Iterator[GaugeMetricFamily]:
        memory = self._memory()
        nodes = memory.nodes() if memory is not None else ()
        for suffix, text, value in FAMILIES:
            fam = GaugeMetricFamily(f"hwagent_memory_{suffix}", text, labels=["numa_node", "resource"])
            for n in nodes:
                fam.add_metric([str(n.node), n.resource], float(value(n)))
            yield fam
        held = GaugeMetricFamily("hwagent_memory_containers", "Containers holding memory blocks of the memory manager.")
        if memory is not None:
            held.add_metric([], float(sum(1 for b in memory.all_blocks().values() if b)))
        yield held

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())
