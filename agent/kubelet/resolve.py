"""Joining what the kubelet exposes into one ``PodDirectory`` (pure).

No single kubelet interface says "cgroup P is container C of pod N/S":
- the kubepods tree gives pod UID, QoS class and container id per cgroup;
- the pod-resources API gives namespace/name/containers with their devices and
  exclusive CPUs, but no UIDs and no container ids;
- the kubelet's log layout (``/var/log/pods/<ns>_<pod>_<uid>/``,
  ``/var/log/containers/<pod>_<ns>_<container>-<id>.log``), which every log
  shipper relies on, links UIDs to pod names and container ids to container names;
- in Katalyst deployments the QRM CPU plugin is told uid, namespace, name and
  container of every allocation.
This module joins them, best source first, and never guesses a name two
sources disagree on: a container nothing names keeps its pod's labels with an
empty container name (the pod sandbox, typically).

QoS label: the Katalyst level when the CPU policy knows it; otherwise from the
kubelet's class: BestEffort -> reclaimed, Guaranteed with exclusive CPUs ->
dedicated, the rest -> shared. That is the order eviction uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agent.cgroups.kubepods import KubepodsCgroup
from agent.cpuset import CPUSet
from agent.contracts.poddirectory import ContainerIdentity, DeviceHolder, PodDirectory, PodResourcesSnapshot

__all__ = ["LogNames", "CPUAllocation", "build_directory", "qos_from_class"]


@dataclass(frozen=True)
class LogNames:
    """What the kubelet's log layout names."""

    #: pod uid -> (namespace, pod name)
    pods: Mapping[str, tuple[str, str]]
    #: container id -> (namespace, pod name, container name)
    containers: Mapping[str, tuple[str, str, str]]


@dataclass(frozen=True)
class CPUAllocation:
    """The part of a CPU-policy allocation record the join uses."""

    pod_uid: str
    namespace: str
    pod: str
    container: str
    qos: str
    cgroup: str | None = None


def qos_from_class(qos_class: str, exclusive: bool) -> str:
    if qos_class == "besteffort":
        return "reclaimed"
    if qos_class == "guaranteed" and exclusive:
        return "dedicated"
    return "shared"


def build_directory(
    cgroups: Iterable[KubepodsCgroup],
    snapshot: PodResourcesSnapshot | None,
    logs: LogNames | None = None,
    allocations: Iterable[CPUAllocation] = (),
    *,
    source: str = "",
    at: float = 0.0,
) -> PodDirectory:
    logs = logs or LogNames({}, {})
    allocs = list(allocations)
    pod_names: dict[str, tuple[str, str]] = dict(logs.pods)
    for a in allocs:
        if a.namespace or a.pod:
            pod_names.setdefault(a.pod_uid, (a.namespace, a.pod))
    by_cgroup_alloc = {a.cgroup.rstrip("/"): a for a in allocs if a.cgroup}
    qos_by_container = {(a.pod_uid, a.container): a.qos for a in allocs if a.qos}
    # pod-resources by (namespace, name): container name -> exclusive cpus
    pr_pods = {(p.namespace, p.name): p for p in (snapshot.pods if snapshot else ())}

    out: list[ContainerIdentity] = []
    for cg in sorted(cgroups, key=lambda c: c.path):
        ns, pod = pod_names.get(cg.pod_uid, ("", ""))
        container = ""
        named = logs.containers.get(cg.container_id)
        alloc = by_cgroup_alloc.get(cg.path)
        if alloc is not None:
            container = alloc.container
            ns, pod = ns or alloc.namespace, pod or alloc.pod
        elif named is not None and (not pod or (named[0], named[1]) == (ns, pod)):
            ns, pod, container = named
        exclusive = CPUSet()
        pr = pr_pods.get((ns, pod))
        if pr is not None:
            if not container and cg.cpus is not None:
                # a container with exclusive CPUs is the one whose cpuset equals them
                same = [c.name for c in pr.containers if c.cpu_ids and c.cpu_ids == cg.cpus]
                if len(same) == 1:
                    container = same[0]
            for c in pr.containers:
                if c.name == container:
                    exclusive = c.cpu_ids
        qos = qos_by_container.get((cg.pod_uid, container)) or qos_from_class(cg.qos_class, bool(exclusive))
        out.append(ContainerIdentity(ns, pod or cg.pod_uid, container, cg.pod_uid, _short_qos(qos), cg.path, cg.cpus))

    devices: dict[tuple[str, str], DeviceHolder] = {}
    for p in snapshot.pods if snapshot else ():
        for c in p.containers:
            for resource, ids in c.devices.items():
                for dev in ids:
                    devices[(resource, dev)] = DeviceHolder(p.namespace, p.name, c.name)
    return PodDirectory(tuple(out), devices, pod_names, source=source, at=at)


def _short_qos(level: str) -> str:
    lv = level.lower()
    return lv[: -len("_cores")] if lv.endswith("_cores") else lv
