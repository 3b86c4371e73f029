"""The CPU policy's values that cross components: the request a container is
placed with, the hints and the allocation the policy answers, and the record of
one container's placement (``AllocationInfo``, what every reader of
``CPUAllocations.allocations()`` gets).

They live here, below the owners, so that admission, pod-resources, status and
pressure name them without importing the CPU policy's package; the policy's
own state (pools, machine state, index) stays in ``agent.cpu``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.cgroups.paths import validate_rel_path
from agent.contracts.hints import TopologyHint
from agent.cpuset import CPUSet
from agent.sharedvalues import shared_map, text

__all__ = [
    "AllocateResult",
    "AllocationInfo",
    "HintsResult",
    "Request",
    "CPU_RESOURCE",
    "SHARED",
    "DEDICATED",
    "RECLAIMED",
    "SYSTEM",
    "MAIN",
    "SIDECAR",
    "INIT",
]

#: the resource name the CPU policy answers for (resourceplugin ``ResourceName``)
CPU_RESOURCE = "cpu"

#: the QoS levels (katalyst.kubewharf.io/qos_level)
SHARED = "shared_cores"
DEDICATED = "dedicated_cores"
RECLAIMED = "reclaimed_cores"
SYSTEM = "system_cores"

#: container types of a request
MAIN = "MAIN"
SIDECAR = "SIDECAR"
INIT = "INIT"


@dataclass(frozen=True)
class Request:
    """The fields of resourceplugin ResourceRequest the policy uses."""

    pod_uid: str
    container_name: str
    pod_namespace: str = ""
    pod_name: str = ""
    container_type: str = MAIN  # INIT / MAIN / SIDECAR / EPHEMERAL
    container_index: int = 0
    pod_role: str = ""
    pod_type: str = ""
    resource_name: str = CPU_RESOURCE
    hint: TopologyHint | None = None
    resource_requests: Mapping[str, float] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    native_qos_class: str = ""


@dataclass(frozen=True)
class HintsResult:
    #: None = no NUMA preference (upstream ``{"cpu": nil}``)
    hints: list[TopologyHint] | None
    labels: dict[str, str]
    annotations: dict[str, str]


@dataclass(frozen=True)
class AllocateResult:
    #: None for init containers, debug pods, and sidecars whose main is not there yet
    allocation: AllocationInfo | None
    labels: dict[str, str]
    annotations: dict[str, str]
    debug: bool = False
    #: the request's hint, echoed as upstream does (None when absent)
    hint: TopologyHint | None = None
    #: True for a sidecar that arrived before its main container
    empty: bool = False



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
        re-sizing rewrites every member of a pool). Drops the encoding cache,
        except the parts around the cpuset when only the cpuset changes."""
        new = object.__new__(AllocationInfo)
        d = new.__dict__
        d.update(self.__dict__)
        d.pop("_enc", None)
        if "_encp" in d and changes.keys() != {"cpuset"}:
            del d["_encp"]
        d.update(changes)
        return new

    def with_cpuset(self, cpus: CPUSet) -> AllocationInfo:
        """``evolve(cpuset=cpus)``, the one change pool re-sizing makes to every
        member, without the generic path's overhead."""
        new = object.__new__(AllocationInfo)
        d = new.__dict__
        d.update(self.__dict__)
        d["cpuset"] = cpus
        d.pop("_enc", None)
        return new

    def encoded(self, keep: bool = True) -> str:
        """Canonical JSON of this entry (``json.dumps(to_json(), sort_keys=True,
        separators=(",", ":"))``), cached unless ``keep`` is False: a caller that
        encodes the same entries again and again re-encodes only the ones that
        changed. The text before and after the cpuset is kept apart, so a pool
        resize that moves every member to a new cpuset re-joins strings instead of
        re-encoding each member. ``keep=False`` uses a cache that is there and adds
        none (the checkpoint: its snapshots are rare since the journal, and the text
        on 10,000 entries held ~25 MB)."""
        enc = self.__dict__.get("_enc")
        if enc is None:
            parts = self.__dict__.get("_encp")
            if parts is None:
                parts = _split_encoding(self.to_json(with_cpuset=False))
                if keep:
                    object.__setattr__(self, "_encp", parts)
            enc = parts[0] + _cpuset_json(self.cpuset) + parts[1]
            if keep:
                object.__setattr__(self, "_enc", enc)
        return enc

    @property
    def is_dedicated_binding(self) -> bool:
        return self.qos_level == DEDICATED and self.numa_binding

    @property
    def is_sidecar(self) -> bool:
        return self.container_type == SIDECAR

    def to_json(self, with_cpuset: bool = True) -> dict[str, Any]:
        """``with_cpuset=False``: the cpuset's value is left out (None), for
        encoders that format it apart (a 256-CPU list costs ~100 us)."""
        return {
            "pod_uid": self.pod_uid,
            "pod_namespace": self.pod_namespace,
            "pod_name": self.pod_name,
            "container_name": self.container_name,
            "container_type": self.container_type,
            "container_index": self.container_index,
            "qos_level": self.qos_level,
            "request_quantity": self.request_quantity,
            "cpuset": str(self.cpuset) if with_cpuset else None,
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
        """The values every entry repeats (namespace, levels, pool, label maps) are
        shared (``agent.sharedvalues``): a restart decodes 10,000 entries; the pod's
        uid and name are the same objects as in the device table and pod records."""
        return cls(
            pod_uid=text(str(d["pod_uid"])),
            pod_namespace=text(str(d.get("pod_namespace", ""))),
            pod_name=text(str(d.get("pod_name", ""))),
            container_name=text(str(d["container_name"])),
            container_type=text(str(d.get("container_type", MAIN))),
            container_index=int(d.get("container_index", 0)),
            qos_level=text(str(d["qos_level"])),
            request_quantity=float(d.get("request_quantity", 0.0)),
            cpuset=CPUSet.parse(d["cpuset"]),
            owner_pool_name=text(str(d.get("owner_pool_name", ""))),
            ramp_up=bool(d.get("ramp_up", False)),
            numa_binding=bool(d.get("numa_binding", False)),
            numa_exclusive=bool(d.get("numa_exclusive", False)),
            init_timestamp=float(d.get("init_timestamp", 0.0)),
            labels=shared_map({str(k): str(v) for k, v in d.get("labels", {}).items()}),
            annotations=shared_map({str(k): str(v) for k, v in d.get("annotations", {}).items()}),
            pod_role=text(str(d.get("pod_role", ""))),
            pod_type=text(str(d.get("pod_type", ""))),
            native_qos_class=text(str(d.get("native_qos_class", ""))),
            # a path from disk is refused like one from a launcher (the loader calls it corrupt)
            cgroup_path=None if d.get("cgroup_path") is None else validate_rel_path(d["cgroup_path"], None),
        )


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _split_encoding(d: dict[str, Any]) -> tuple[str, str]:
    """Canonical JSON of ``d`` without its "cpuset" value: (text up to and
    including ``"cpuset":``, text after the value)."""
    d = dict(d)
    del d["cpuset"]
    before = {k: v for k, v in d.items() if k < "cpuset"}
    after = {k: v for k, v in d.items() if k > "cpuset"}
    head = (_dumps(before)[:-1] + ",") if before else "{"
    tail = ("," + _dumps(after)[1:]) if after else "}"
    return head + '"cpuset":', tail


_CPUSET_JSON: dict[CPUSet, str] = {}


def _cpuset_json(cs: CPUSet) -> str:
    """JSON string of a cpuset's list format, memoised: the members of a pool
    share one cpuset, so a 1,000-entry checkpoint formats it once."""
    enc = _CPUSET_JSON.get(cs)
    if enc is None:
        if len(_CPUSET_JSON) >= 4096:
            _CPUSET_JSON.clear()
        enc = _CPUSET_JSON[cs] = _dumps(str(cs))
    return enc
