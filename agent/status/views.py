"""Live views of the running daemon, as plain dicts (what the CLI prints with --format json).

Each view reads the components' published handles on the loop (the status
server calls them there), so no component's state is read mid-change. The
handles a view may use are the fields of ``Handles``: what the status component
looked up at start, None for a component that does not run in this daemon.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.contracts import (
    CPUAllocations,
    DeviceAllocations,
    DevicePlugins,
    EvictionGate,
    EvictionPluginView,
    MemoryAllocations,
    PodDirectorySource,
    PressureSignals,
    WorkloadRegistry,
)
from agent.contracts.drakubelet import DRAKubeletPluginView
from agent.contracts.poddirectory import PodDirectory

__all__ = ["Handles", "resources_view", "cpus_view", "memory_view", "pods_view", "evictions_view", "health_view",
           "ViewUnavailable"]


@dataclass(frozen=True)
class Handles:
    """The published handles status reads (looked up in its start(): it starts last)."""

    cpu: CPUAllocations | None = None
    devices: DeviceAllocations | None = None
    plugins: DevicePlugins | None = None
    pods: PodDirectorySource | None = None
    pressure: PressureSignals | None = None
    eviction_plugin: EvictionPluginView | None = None
    memory: MemoryAllocations | None = None
    dra_plugin: DRAKubeletPluginView | None = None
    advisor: EvictionGate | None = None
    workloads: WorkloadRegistry | None = None


class ViewUnavailable(Exception):
    """The component behind a view is not running in this daemon."""


def _holder(pods: PodDirectorySource | None, resource: str, dev: str) -> dict[str, str] | None:
    if pods is None:
        return None
    h = pods.current.holder_of(resource, dev)
    return None if h is None else {"namespace": h.namespace, "pod": h.pod, "container": h.container}


def resources_view(handles: Handles) -> dict[str, Any]:
    """Standalone: the device-plugin host's state. Kubelet mode: the built-in plugins
    registered with the kubelet, each device's health and the pod holding it."""
    manager = handles.devices
    if manager is not None:
        from agent.status.offline import device_view

        view = device_view(manager.snapshot())
        view["source"] = "device-plugin host (live)"
        return view
    plugins = handles.plugins
    if plugins is None:
        raise ViewUnavailable("neither the device-plugin host nor the built-in device plugins run in this daemon")
    pods = handles.pods
    resources: dict[str, Any] = {}
    for st in plugins.plugin_states():
        entries = []
        for d in st.devices:
            holder = _holder(pods, st.resource, d.id)
            entries.append({"id": d.id, "health": "Healthy" if d.healthy else "Unhealthy", "reason": d.reason,
                            "numa": [] if d.numa_node is None else [d.numa_node],
                            "allocated": holder is not None, "holder": holder})
        resources[st.resource] = {
            "capacity": len(st.devices), "allocatable": st.healthy,
            "allocated": sum(1 for e in entries if e["allocated"]),
            "endpoints": [{"socket": str(st.socket), "state": "registered" if st.registered else "unregistered",
                           "stop_time": None, "error": st.last_error}],
            "devices": entries,
        }
    allocations = []
    if pods is not None:
        for (resource, dev), h in sorted(pods.current.devices.items()):
            allocations.append({"pod_uid": "", "namespace": h.namespace, "pod": h.pod, "container": h.container,
                                "container_type": "", "resource": resource, "devices": [dev], "numa": []})
    return {"source": "built-in device plugins registered with the kubelet (live)", "resources": resources,
            "deleted_resources": [], "allocations": allocations}


def health_view(handles: Handles, components: list[tuple[str, bool]]) -> dict[str, Any]:
    """The node's problems (``hwagent slurm health``): each unhealthy device hwagent offers, each
    unhealthy component, as the Slurm drain counts them (agent.slurm.health, one definition)."""
    from agent.slurm.health import node_problems

    plugins = handles.plugins
    states = [*plugins.plugin_states(), *plugins.dra_states()] if plugins is not None else []
    return {"problems": [{"subject": p.subject, "why": p.why} for p in node_problems(states, components)],
            "devices_watched": plugins is not None}


def cpus_view(handles: Handles, numa_cpus: Mapping[int, Any]) -> dict[str, Any]:
    policy = handles.cpu
    if policy is None:
        raise ViewUnavailable("the CPU policy does not run in this daemon")
    from agent.cpu.view import from_policy, summarize

    allocs = [from_policy(a) for a in policy.allocations()]
    view = summarize(numa_cpus, policy.pools(), allocs, "cpu policy (live)")
    if handles.pressure is not None:  # the picture draws it (agent.status.live)
        view["pool_pressure"] = dict(sorted(handles.pressure.pool_pressure().items()))
    return view


def memory_view(handles: Handles) -> dict[str, Any]:
    """Per NUMA node and memory resource, and each placed container's blocks (``hwagent memory``)."""
    memory = handles.memory
    if memory is None:
        raise ViewUnavailable("the memory manager does not run in this daemon")
    from agent.status.memoryview import memory_view as build

    names = {p["uid"]: (p["namespace"], p["name"]) for p in pods_view(handles)[0]}
    return build(memory, names)


#: where status's pods come from in standalone mode: the owner of which pods exist
REGISTRY_SOURCE = "the workload registry, as hwagent ps lists them"


def pods_view(handles: Handles) -> tuple[list[dict[str, Any]], str]:
    """Every pod the daemon knows, with its containers and devices, and where that came from.

    Standalone: the workload registry, ended pods included, as `hwagent ps` lists them (the
    CPU policy's allocations left out the pods that ended and gave their CPUs back: status
    said 2 pods beside ps's 6), then the pods another front names in the pod directory (the NRI
    runtime's). Kubelet mode: the pod directory's pods (the NRI runtime's and the kubelet's), then
    the CPU policy's."""
    registry = handles.workloads
    if registry is not None:
        listed = []
        for pod in registry.listed():
            spec = pod.spec
            devices = [f"{r}/{d}" for a in pod.assignments.values() for r, ids in sorted(a.devices.items())
                       for d in ids]
            listed.append({"uid": spec.uid, "namespace": spec.namespace, "name": spec.name, "qos": pod.qos,
                           "containers": [c.name for c in spec.all_containers()], "devices": devices})
        source = REGISTRY_SOURCE
        if handles.pods is not None:
            admitted = {p["uid"] for p in listed}
            others = [p for p in _directory_pods(handles.pods.current) if p["uid"] not in admitted]
            if others:
                listed += others
                source += f"; {handles.pods.current.source}"
        return sorted(listed, key=lambda p: (p["namespace"], p["name"], p["uid"])), source
    pods = handles.pods
    out: dict[str, dict[str, Any]] = {}
    source = ""
    if pods is not None:
        source = pods.current.source
        out = {p["uid"]: p for p in _directory_pods(pods.current)}
    policy = handles.cpu
    if policy is not None:
        source = source or "cpu policy allocations"
        for a in policy.allocations():
            p = out.setdefault(a.pod_uid, {"uid": a.pod_uid, "namespace": a.pod_namespace, "name": a.pod_name,
                                          "qos": str(a.qos_level), "containers": [], "devices": []})
            if a.container_name not in p["containers"]:
                p["containers"].append(a.container_name)
    return sorted(out.values(), key=lambda p: (p["namespace"], p["name"], p["uid"])), source


def _directory_pods(d: PodDirectory) -> list[dict[str, Any]]:
    """The pods a pod directory names, with their containers and the devices they hold."""
    out: dict[str, dict[str, Any]] = {}
    for c in d.containers:
        p = out.setdefault(c.pod_uid, {"uid": c.pod_uid, "namespace": c.namespace, "name": c.pod,
                                      "qos": c.qos, "containers": [], "devices": []})
        if c.container and c.container not in p["containers"]:
            p["containers"].append(c.container)
    by_name = {(p["namespace"], p["name"]): p for p in out.values()}
    for (resource, dev), h in sorted(d.devices.items()):
        holder = by_name.get((h.namespace, h.pod))
        if holder is not None:
            holder["devices"].append(f"{resource}/{dev}")
    return list(out.values())


def evictions_view(handles: Handles, keep: int = 10) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    engine = handles.pressure
    if engine is not None:
        recs.extend(engine.recent_evictions())
    plugin = handles.eviction_plugin
    if plugin is not None:
        recs.extend(plugin.recent)
    return sorted(recs, key=lambda r: r.get("wall_time", 0.0))[-keep:]
