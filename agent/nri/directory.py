"""The pod directory of an NRI node: who runs in which cgroup, from what the runtime told the plugin.

In kubelet mode the directory is joined from three half-sources (the kubepods
tree, pod-resources, the log layout: ``agent.kubelet.resolve``). On an NRI node
the runtime names everything itself in each pod sandbox and container message
(namespace, name, uid, annotations, the kubelet's cgroup parent, the container's
cgroup and pid), so :func:`build_directory` is a plain translation of the
plugin's :class:`~agent.nri.view.NodeView` into the same
:class:`~agent.contracts.poddirectory.PodDirectory` value, and every view that
names kubelet pods (status, pressure signals and their metric labels, the
eviction plugin) names NRI pods the same way by asking it.

QoS label: the level the placement gave the container (``qos_of``: the NRI
placement's record), else the one classification of the NRI front
(``agent.nri.classify``, as the kubelet and Katalyst would: Katalyst's
``katalyst.kubewharf.io/qos_level`` annotation, else BestEffort -> reclaimed,
Guaranteed with whole CPUs -> dedicated, the rest -> shared); a pod opted out of
placement keeps the label its class would give.

:class:`NriPodDirectorySource` is the thin adapter the daemon publishes as
``POD_DIRECTORY``: it rebuilds the value only when the view changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from agent.contracts.poddirectory import ContainerIdentity, PodDirectory
from agent.contracts.pressure import Container
from agent.cpuset import CPUSet
from agent.nri.cgpath import cgroupfs_path
from agent.nri.classify import OPT_OUT_KEY, Resources, classify
from agent.nri.view import ContainerInfo, NodeView, PodInfo

__all__ = ["NriPodDirectorySource", "QosOf", "build_directory", "qos_label"]

#: a placement's own word on a container's QoS level (``None``: it has none)
QosOf = Callable[[PodInfo, ContainerInfo | None], str | None]


def qos_label(pod: PodInfo, ctr: ContainerInfo | None) -> str:
    """The QoS label of a container (``ctr`` None: the pod's sandbox), by the NRI front's classification."""
    res = Resources() if ctr is None else Resources(cpu_shares=ctr.cpu_shares, cpu_quota=ctr.cpu_quota,
                                                    cpu_period=ctr.cpu_period)
    annotations = {k: v for k, v in pod.annotations.items() if k != OPT_OUT_KEY}  # opted out: still named
    return classify(annotations, {}, pod.cgroup_parent, res).level.strip().lower().removesuffix("_cores")


def _cgroup(runtime_path: str) -> str:
    try:
        return cgroupfs_path(runtime_path)
    except ValueError:
        return ""  # a name no cgroupfs path stands for names nothing


def _cpus(text: str) -> CPUSet | None:
    try:
        return CPUSet.parse(text) if text else None
    except ValueError:
        return None


def build_directory(view: NodeView, *, qos_of: QosOf | None = None, source: str = "", at: float = 0.0) -> PodDirectory:
    """Every container (and each pod's sandbox, with an empty container name, as in kubelet mode)
    whose cgroup the runtime named, with its pod's names; a container whose pod the runtime has
    not reported is left out (no names to give it). The sandbox takes its containers' level where
    they agree, so a pod shows one QoS wherever it is listed."""

    def qos(pod: PodInfo, ctr: ContainerInfo | None) -> str:
        own = qos_of(pod, ctr) if qos_of is not None else None
        return (own or qos_label(pod, ctr)).removesuffix("_cores")

    out: list[ContainerIdentity] = []
    levels: dict[str, set[str]] = {}
    for ctr in view.containers.values():
        owner = view.pods.get(ctr.pod_id)
        cg = _cgroup(ctr.cgroups_path)
        if owner is None or not cg:
            continue
        level = qos(owner, ctr)
        levels.setdefault(owner.id, set()).add(level)
        out.append(ContainerIdentity(owner.namespace, owner.name, ctr.name, owner.uid, level, cg,
                                     _cpus(ctr.cpuset_cpus)))
    for pod in view.pods.values():
        cg = _cgroup(pod.cgroups_path)
        if cg:  # the sandbox has its containers' level where they agree (a pod has one, as Katalyst's)
            same = levels.get(pod.id, set())
            level = next(iter(same)) if len(same) == 1 else qos(pod, None)
            out.append(ContainerIdentity(pod.namespace, pod.name, "", pod.uid, level, cg, None))
    out.sort(key=lambda c: (c.namespace, c.pod, c.container, c.cgroup))
    pods = {p.uid: (p.namespace, p.name) for p in view.pods.values() if p.uid}
    return PodDirectory(tuple(out), {}, pods, source=source, at=at)


class NriPodDirectorySource:
    """The ``PodDirectorySource`` of an NRI node: the plugin's view as a directory, rebuilt when it changed.

    Read on the daemon's loop, which owns the view (the plugin's handlers run there), so no
    change is seen half-made."""

    def __init__(self, view: NodeView, node_cpus: CPUSet, *, source: str = "NRI runtime",
                 qos_of: QosOf | None = None, error: Callable[[], str] | None = None) -> None:
        self.view = view
        self.node_cpus = node_cpus
        self.source = source
        self.qos_of = qos_of
        self._error = error
        self._built: PodDirectory = PodDirectory(source=source)
        self._version = -1
        self._pressure: tuple[PodDirectory | None, list[Container]] = (None, [])

    @property
    def current(self) -> PodDirectory:
        if self.view.version != self._version:
            self._version = self.view.version
            self._built = build_directory(self.view, qos_of=self.qos_of, source=self.source, at=time.monotonic())
        return self._built

    @property
    def last_error(self) -> str:
        """The plugin's last connection error ("" while registered): the names may be stale meanwhile."""
        return self._error() if self._error is not None else ""

    def containers_for_pressure(self) -> list[Container]:
        """The directory's containers for the pressure tick, translated once per change of the view."""
        d = self.current
        if self._pressure[0] is not d:
            self._pressure = (d, d.pressure_containers(self.node_cpus))
        return list(self._pressure[1])
