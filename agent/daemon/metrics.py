"""The daemon's own metrics: identity, the topology it read, and component health.

Metric objects live at module level on prometheus_client's default REGISTRY
(the project convention: whoever owns a metric defines it in its own module),
alongside the default process and GC collectors, which are how the agent's
own overhead is watched. The HTTP endpoint that serves them is
``agent.daemon.metrics_http``.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import REGISTRY, Gauge, Info, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from agent import __version__
from agent.topology.model import Topology

__all__ = ["BUILD_INFO", "ComponentHealthCollector", "publish_build_info", "publish_topology"]

# `<counter>_created` doubles every counter's series for a timestamp nobody
# queries (the process start time says the same); the library checks this flag
# when it renders samples, so it holds for counters defined before this import too.
disable_created_metrics()

BUILD_INFO = Info("hwagent_build", "Version of hwagent, the Python running it and the kernel it runs on.")

TOPOLOGY_CPUS = Gauge("hwagent_topology_cpus", "Logical CPUs by state, as read at start.", ["state"])
TOPOLOGY_CORES = Gauge(
    "hwagent_topology_cores", "Physical cores (package, die, core id within a sibling set) of online CPUs."
)
TOPOLOGY_PACKAGES = Gauge("hwagent_topology_packages", "CPU packages (sockets).")
TOPOLOGY_NUMA_NODES = Gauge("hwagent_topology_numa_nodes", "NUMA nodes, memory-only nodes included.")
TOPOLOGY_NUMA_MEMORY = Gauge(
    "hwagent_topology_numa_node_memory_bytes", "Memory of one NUMA node (node meminfo MemTotal).", ["numa_node"]
)
TOPOLOGY_WARNINGS = Gauge(
    "hwagent_topology_warnings", "Oddities met while reading the topology (each one is logged at start)."
)

#: the states of hwagent_topology_cpus; fixed so the label set stays bounded
CPU_STATES = ("possible", "present", "online", "offline", "isolated")


def publish_build_info() -> None:
    BUILD_INFO.info(
        {
            "version": __version__,
            "python_version": platform.python_version(),
            "kernel": os.uname().release,
        }
    )


def publish_topology(topo: Topology) -> None:
    """Set the topology gauges; earlier per-node series are dropped first."""
    counts = {
        "possible": len(topo.possible),
        "present": len(topo.present),
        "online": len(topo.online),
        "offline": len(topo.offline),
        "isolated": len(topo.isolated),
    }
    for state in CPU_STATES:
        TOPOLOGY_CPUS.labels(state=state).set(counts[state])
    TOPOLOGY_CORES.set(len(topo.cores))
    TOPOLOGY_PACKAGES.set(len(topo.package_ids))
    TOPOLOGY_NUMA_NODES.set(len(topo.numa_nodes))
    TOPOLOGY_NUMA_MEMORY.clear()
    for node in topo.numa_nodes:
        if node.memory_bytes is not None:
            TOPOLOGY_NUMA_MEMORY.labels(numa_node=str(node.id)).set(node.memory_bytes)
    TOPOLOGY_WARNINGS.set(len(topo.warnings))


class ComponentHealthCollector(Collector):
    """``hwagent_component_healthy{component}``, asked of the components at scrape time.

    A collector rather than a Gauge so the value is never stale and a
    component that has stopped disappears from the output.
    """

    def __init__(self, source: Callable[[], Iterable[tuple[str, bool]]]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "hwagent_component_healthy", "1 when the component reports itself healthy.", labels=["component"]
        )
        for name, ok in self._source():
            family.add_metric([name], 1.0 if ok else 0.0)
        yield family

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # an empty describe() keeps registration from calling collect() early
        return iter(())


def register_collector(collector: Collector) -> Callable[[], None]:
    """Register on the default REGISTRY; returns the undo (the daemon unregisters at exit)."""
    REGISTRY.register(collector)
    return lambda: REGISTRY.unregister(collector)
