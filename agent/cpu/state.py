"""Policy state: container allocations and pools, plus the per-NUMA machine
state derived from them.

Differences from upstream's encoding, on purpose: pools are a separate map
(upstream stores them as pseudo-pods with container key ""), and machine state
is never stored as truth — it is always regenerated from the entries
(upstream also regenerates it on restore, then rewrites it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from agent.cpu.calculator import TopoIndex
from agent.cpu.qos import DEDICATED
from agent.cpuset import CPUSet

__all__ = ["AllocationInfo", "PolicyState", "NUMAState", "machine_state"]

MAIN = "MAIN"
SIDECAR = "SIDECAR"
INIT = "INIT"


@dataclass(frozen=True)
class AllocationInfo:
    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str
    container_type: str
    container_index: int
    qos_level: str
    request_quantity: float
    cpuset: CPUSet
    owner_pool_name: str = ""
    ramp_up: bool = False
    numa_binding: bool = False
    numa_exclusive: bool = False
    #: wall-clock seconds when the (re)allocation happened; drives ramp-up
    init_timestamp: float = 0.0
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    annotations: dict[str, str] = field(default_factory=dict, hash=False)
    pod_role: str = ""
    pod_type: str = ""
    native_qos_class: str = ""
    #: the container's cgroup (relative to the controller mount) once known
    cgroup_path: str | None = None

    def evolve(self, **changes: Any) -> AllocationInfo:
        """``dataclasses.replace`` without re-running __init__ (10x cheaper; pool
        re-sizing rewrites every member of a pool). Drops the encoding cache."""
        new = object.__new__(AllocationInfo)
        d = new.__dict__
        d.update(self.__dict__)
        d.pop("_enc", None)
        d.update(changes)
        return new

    def encoded(self) -> str:
        """Canonical JSON of this entry, cached: a checkpoint with 1,000 entries
        re-encodes only the ones that changed."""
        enc = self.__dict__.get("_enc")
        if enc is None:
            enc = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
            object.__setattr__(self, "_enc", enc)
        return enc

    @property
    def is_dedicated_binding(self) -> bool:
        return self.qos_level == DEDICATED and self.numa_binding

    @property
    def is_sidecar(self) -> bool:
        return self.container_type == SIDECAR

    def to_json(self) -> dict[str, Any]:
        return {
            "pod_uid": self.pod_uid,
            "pod_namespace": self.pod_namespace,
            "pod_name": self.pod_name,
            "container_name": self.container_name,
            "container_type": self.container_type,
            "container_index": self.container_index,
            "qos_level": self.qos_level,
            "request_quantity": self.request_quantity,
            "cpuset": str(self.cpuset),
            "owner_pool_name": self.owner_pool_name,
            "ramp_up": self.ramp_up,
            "numa_binding": self.numa_binding,
            "numa_exclusive": self.numa_exclusive,
            "init_timestamp": self.init_timestamp,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "pod_role": self.pod_role,
            "pod_type": self.pod_type,
            "native_qos_class": self.native_qos_class,
            "cgroup_path": self.cgroup_path,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> AllocationInfo:
        return cls(
            pod_uid=str(d["pod_uid"]),
            pod_namespace=str(d.get("pod_namespace", "")),
            pod_name=str(d.get("pod_name", "")),
            container_name=str(d["container_name"]),
            container_type=str(d.get("container_type", MAIN)),
            container_index=int(d.get("container_index", 0)),
            qos_level=str(d["qos_level"]),
            request_quantity=float(d.get("request_quantity", 0.0)),
            cpuset=CPUSet.parse(d["cpuset"]),
            owner_pool_name=str(d.get("owner_pool_name", "")),
            ramp_up=bool(d.get("ramp_up", False)),
            numa_binding=bool(d.get("numa_binding", False)),
            numa_exclusive=bool(d.get("numa_exclusive", False)),
            init_timestamp=float(d.get("init_timestamp", 0.0)),
            labels={str(k): str(v) for k, v in d.get("labels", {}).items()},
            annotations={str(k): str(v) for k, v in d.get("annotations", {}).items()},
            pod_role=str(d.get("pod_role", "")),
            pod_type=str(d.get("pod_type", "")),
            native_qos_class=str(d.get("native_qos_class", "")),
            cgroup_path=d.get("cgroup_path"),
        )


Entries = dict[str, dict[str, AllocationInfo]]


@dataclass(frozen=True)
class PolicyState:
    """Immutable snapshot. The policy builds a new one per mutation and swaps
    it in only when the whole operation succeeded: that is what keeps state
    unchanged on any error."""

    pools: dict[str, CPUSet] = field(default_factory=dict)
    entries: Entries = field(default_factory=dict)

    def get(self, pod_uid: str, container: str) -> AllocationInfo | None:
        return self.entries.get(pod_uid, {}).get(container)

    def containers(self) -> list[AllocationInfo]:
        return [a for pod in self.entries.values() for a in pod.values()]

    def with_entry(self, a: AllocationInfo) -> PolicyState:
        entries = dict(self.entries)
        pod = dict(entries.get(a.pod_uid, {}))
        pod[a.container_name] = a
        entries[a.pod_uid] = pod
        return replace(self, entries=entries)

    def without_entry(self, pod_uid: str, container: str) -> PolicyState:
        if container not in self.entries.get(pod_uid, {}):
            return self
        entries = dict(self.entries)
        pod = dict(entries[pod_uid])
        del pod[container]
        if pod:
            entries[pod_uid] = pod
        else:
            del entries[pod_uid]
        return replace(self, entries=entries)

    def without_pod(self, pod_uid: str) -> PolicyState:
        if pod_uid not in self.entries:
            return self
        entries = dict(self.entries)
        del entries[pod_uid]
        return replace(self, entries=entries)

    def to_json(self) -> dict[str, Any]:
        return {
            "pools": {k: str(v) for k, v in sorted(self.pools.items())},
            "pod_entries": {
                uid: {c: a.to_json() for c, a in sorted(pod.items())} for uid, pod in sorted(self.entries.items())
            },
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PolicyState:
        pools = {str(k): CPUSet.parse(v) for k, v in d.get("pools", {}).items()}
        entries: Entries = {}
        for uid, pod in d.get("pod_entries", {}).items():
            entries[str(uid)] = {str(c): AllocationInfo.from_json(a) for c, a in pod.items()}
        return cls(pools=pools, entries=entries)


@dataclass(frozen=True)
class NUMAState:
    """One NUMA node as the hint and dedicated handlers see it."""

    id: int
    default_cpuset: CPUSet  # NUMA CPUs not held by dedicated numa_binding containers
    allocated_cpuset: CPUSet  # held by dedicated numa_binding containers
    #: (pod_uid, container) -> the container's CPUs in this NUMA
    pod_entries: dict[tuple[str, str], CPUSet] = field(default_factory=dict, hash=False)


def machine_state(idx: TopoIndex, state: PolicyState, with_entries: bool = False) -> dict[int, NUMAState]:
    """Regenerate per-NUMA state from container entries (pools excluded).

    Only dedicated numa_binding containers shape default/allocated; the
    per-NUMA container slices (``with_entries``) cost a pass over every CPU of
    every container and are built only for views that show them."""
    allocated: dict[int, set[int]] = {n: set() for n in idx.numa_ids}
    per_numa: dict[int, dict[tuple[str, str], set[int]]] = {n: {} for n in idx.numa_ids}
    for a in state.containers():
        dedicated = a.is_dedicated_binding and not a.is_sidecar
        if not dedicated and not with_entries:
            continue
        for i in a.cpuset:
            n = idx.numa_of.get(i)
            if n is None:
                continue
            if with_entries:
                per_numa[n].setdefault((a.pod_uid, a.container_name), set()).add(i)
            if dedicated:
                allocated[n].add(i)
    return {
        n: NUMAState(
            id=n,
            default_cpuset=CPUSet(idx.numa_cpus[n] - allocated[n]),
            allocated_cpuset=CPUSet(allocated[n]),
            pod_entries={k: CPUSet(v) for k, v in per_numa[n].items()},
        )
        for n in idx.numa_ids
    }
