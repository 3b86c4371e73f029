"""What the runtime has told the NRI plugin about the node's pods and containers.

Pure bookkeeping, no I/O: ``Synchronize`` replaces the whole picture (the
runtime sends every pod and container it knows), and each event updates one
entry. The placement decisions that will read it are still to come
(docs/nri.md); for now it is what `Synchronize` and the events recorded, kept
small (names, ids, state, and what the pod directory names a container by:
cgroup, pid, annotations, CPU resources), never the runtime's whole messages.
``version`` counts the changes, so a reader rebuilds what it derives only when
the picture moved (``agent.nri.directory``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from agent.api.nri.v1alpha1 import api_pb2 as nri

__all__ = ["ContainerInfo", "NodeView", "PodInfo"]

_STATE_NAMES: dict[int, str] = {
    nri.CONTAINER_UNKNOWN: "unknown", nri.CONTAINER_CREATED: "created", nri.CONTAINER_PAUSED: "paused",
    nri.CONTAINER_RUNNING: "running", nri.CONTAINER_STOPPED: "stopped",
}

#: the state a container is in after an event about it (others leave the runtime's word)
_EVENT_STATES: dict[int, str] = {
    nri.CREATE_CONTAINER: "created", nri.POST_CREATE_CONTAINER: "created",
    nri.START_CONTAINER: "running", nri.POST_START_CONTAINER: "running", nri.STOP_CONTAINER: "stopped",
}


@dataclass(frozen=True)
class PodInfo:
    id: str
    namespace: str
    name: str
    uid: str
    #: the pod's annotations (Katalyst's qos_level is read from them)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: the kubelet's cgroup parent of the pod (its QoS class is in it: .../besteffort/..., -burstable-)
    cgroup_parent: str = ""
    #: the sandbox (pause) container's cgroup, as the runtime names it
    cgroups_path: str = ""
    pid: int = 0

    @classmethod
    def of(cls, pod: nri.PodSandbox) -> PodInfo:
        return cls(id=pod.id, namespace=pod.namespace, name=pod.name, uid=pod.uid,
                   annotations=dict(pod.annotations), cgroup_parent=pod.linux.cgroup_parent,
                   cgroups_path=pod.linux.cgroups_path, pid=pod.pid)


@dataclass(frozen=True)
class ContainerInfo:
    id: str
    pod_id: str
    name: str
    state: str
    #: the container's cgroup as the runtime names it (OCI linux.cgroupsPath: a path, or systemd's slice:prefix:name)
    cgroups_path: str = ""
    #: its init process on the host, 0 before it started
    pid: int = 0
    #: the CPU resources the kubelet set (None: unset), from which its QoS is classified (agent.nri.classify)
    cpu_shares: int | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    #: the cpuset the runtime reports for it ("" when it set none)
    cpuset_cpus: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, ctr: nri.Container, state: str | None = None) -> ContainerInfo:
        cpu = ctr.linux.resources.cpu
        return cls(id=ctr.id, pod_id=ctr.pod_sandbox_id, name=ctr.name,
                   state=state or _STATE_NAMES.get(ctr.state, "unknown"),
                   cgroups_path=ctr.linux.cgroups_path, pid=ctr.pid,
                   cpu_shares=cpu.shares.value if cpu.HasField("shares") else None,
                   cpu_quota=cpu.quota.value if cpu.HasField("quota") else None,
                   cpu_period=cpu.period.value if cpu.HasField("period") else None,
                   cpuset_cpus=cpu.cpus, annotations=dict(ctr.annotations))

    def merged(self, earlier: ContainerInfo | None) -> ContainerInfo:
        """This event's word, keeping what an earlier one said and this one left out (a stop
        event may carry no pid or cgroup)."""
        if earlier is None:
            return self
        return replace(self, cgroups_path=self.cgroups_path or earlier.cgroups_path, pid=self.pid or earlier.pid,
                       cpu_shares=earlier.cpu_shares if self.cpu_shares is None else self.cpu_shares,
                       cpu_quota=earlier.cpu_quota if self.cpu_quota is None else self.cpu_quota,
                       cpu_period=earlier.cpu_period if self.cpu_period is None else self.cpu_period,
                       cpuset_cpus=self.cpuset_cpus or earlier.cpuset_cpus,
                       annotations=self.annotations or earlier.annotations)


@dataclass
class NodeView:
    pods: dict[str, PodInfo] = field(default_factory=dict)
    containers: dict[str, ContainerInfo] = field(default_factory=dict)
    #: bumped on every change (a synchronize or an event)
    version: int = 0
    #: pod id -> ids of its containers (a pod's removal drops them without a pass over all)
    _by_pod: dict[str, set[str]] = field(default_factory=dict, repr=False)

    def synchronize(self, pods: Iterable[nri.PodSandbox], containers: Iterable[nri.Container]) -> None:
        """The runtime's full list: whatever it does not name is gone."""
        self.version += 1
        self.pods = {p.id: PodInfo.of(p) for p in pods}
        self.containers = {c.id: ContainerInfo.of(c) for c in containers}
        self._by_pod = {}
        for c in self.containers.values():
            self._by_pod.setdefault(c.pod_id, set()).add(c.id)

    def pod_event(self, event: int, pod: nri.PodSandbox) -> None:
        self.version += 1
        if event == nri.REMOVE_POD_SANDBOX:
            self.pods.pop(pod.id, None)
            for cid in self._by_pod.pop(pod.id, ()):
                self.containers.pop(cid, None)
        elif pod.id:
            self.pods[pod.id] = PodInfo.of(pod)

    def container_event(self, event: int, pod: nri.PodSandbox | None, ctr: nri.Container) -> None:
        self.version += 1
        if pod is not None and pod.id:
            self.pods.setdefault(pod.id, PodInfo.of(pod))
        if event == nri.REMOVE_CONTAINER:
            gone = self.containers.pop(ctr.id, None)
            if gone is not None:
                ids = self._by_pod.get(gone.pod_id)
                if ids is not None:
                    ids.discard(gone.id)
                    if not ids:
                        del self._by_pod[gone.pod_id]
            return
        state = _EVENT_STATES.get(event)
        if ctr.id:
            info = self.containers[ctr.id] = ContainerInfo.of(ctr, state).merged(self.containers.get(ctr.id))
            self._by_pod.setdefault(info.pod_id, set()).add(info.id)

    def describe(self, pod_id: str, container_name: str = "") -> str:
        """"namespace/name[/container]" for logs, or the bare id of a pod not (yet) known."""
        pod = self.pods.get(pod_id)
        base = f"{pod.namespace}/{pod.name}" if pod else pod_id
        return f"{base}/{container_name}" if container_name else base
