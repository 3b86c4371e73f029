"""What the runtime has told the NRI plugin about the node's pods and containers.

Pure bookkeeping, no I/O: ``Synchronize`` replaces the whole picture (the
runtime sends every pod and container it knows), and each event updates one
entry. The placement decisions that will read it are still to come
(docs/nri.md); for now it is what `Synchronize` and the events recorded, kept
small (names, ids, state), never the runtime's whole messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

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

    @classmethod
    def of(cls, pod: nri.PodSandbox) -> PodInfo:
        return cls(id=pod.id, namespace=pod.namespace, name=pod.name, uid=pod.uid)


@dataclass(frozen=True)
class ContainerInfo:
    id: str
    pod_id: str
    name: str
    state: str

    @classmethod
    def of(cls, ctr: nri.Container, state: str | None = None) -> ContainerInfo:
        return cls(id=ctr.id, pod_id=ctr.pod_sandbox_id, name=ctr.name,
                   state=state or _STATE_NAMES.get(ctr.state, "unknown"))


@dataclass
class NodeView:
    pods: dict[str, PodInfo] = field(default_factory=dict)
    containers: dict[str, ContainerInfo] = field(default_factory=dict)

    def synchronize(self, pods: Iterable[nri.PodSandbox], containers: Iterable[nri.Container]) -> None:
        """The runtime's full list: whatever it does not name is gone."""
        self.pods = {p.id: PodInfo.of(p) for p in pods}
        self.containers = {c.id: ContainerInfo.of(c) for c in containers}

    def pod_event(self, event: int, pod: nri.PodSandbox) -> None:
        if event == nri.REMOVE_POD_SANDBOX:
            self.pods.pop(pod.id, None)
            for cid in [c.id for c in self.containers.values() if c.pod_id == pod.id]:
                del self.containers[cid]
        elif pod.id:
            self.pods[pod.id] = PodInfo.of(pod)

    def container_event(self, event: int, pod: nri.PodSandbox | None, ctr: nri.Container) -> None:
        if pod is not None and pod.id:
            self.pods.setdefault(pod.id, PodInfo.of(pod))
        if event == nri.REMOVE_CONTAINER:
            self.containers.pop(ctr.id, None)
            return
        state = _EVENT_STATES.get(event)
        if ctr.id:
            self.containers[ctr.id] = ContainerInfo.of(ctr, state)

    def describe(self, pod_id: str, container_name: str = "") -> str:
        """"namespace/name[/container]" for logs, or the bare id of a pod not (yet) known."""
        pod = self.pods.get(pod_id)
        base = f"{pod.namespace}/{pod.name}" if pod else pod_id
        return f"{base}/{container_name}" if container_name else base
