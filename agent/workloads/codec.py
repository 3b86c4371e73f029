"""The workload model as JSON values and back, for the registry's state and the API.

Explicit per type rather than ``dataclasses.asdict``: the stored form is a
format (it outlives the classes), CPUSets are stored in the Linux list format,
and reading refuses anything that does not decode to the exact types.
"""

from __future__ import annotations

from sys import intern
from typing import Any

from agent.cpuset import CPUSet
from agent.sharedvalues import shared_map
from agent.contracts.pods import (
    AdmittedPod,
    ContainerAssignment,
    ContainerSpec,
    ContainerState,
    ContainerStatus,
    DeviceGrant,
    DeviceNode,
    EnvVar,
    Mount,
    PodPhase,
    PodSpec,
    PodStatus,
    Resources,
    RLimit,
    RunAs,
)

__all__ = ["pod_to_json", "pod_from_json", "status_to_json", "status_from_json", "spec_to_json", "spec_from_json"]


def _resources(r: Resources) -> dict[str, Any]:
    return {
        "cpu_request_milli": r.cpu_request_milli,
        "cpu_limit_milli": r.cpu_limit_milli,
        "memory_request_bytes": r.memory_request_bytes,
        "memory_limit_bytes": r.memory_limit_bytes,
        "extended": dict(sorted(r.extended.items())),
        **({"hugepages": dict(sorted(r.hugepages.items()))} if r.hugepages else {}),
        **({"claims": list(r.claims)} if r.claims else {}),
    }


def _container(c: ContainerSpec) -> dict[str, Any]:
    return {
        "name": c.name,
        "command": list(c.command),
        "args": list(c.args),
        "env": [[e.name, e.value] for e in c.env],
        "working_dir": c.working_dir,
        "resources": _resources(c.resources),
        "kind": c.kind,
    }


def spec_to_json(p: PodSpec) -> dict[str, Any]:
    return {
        "name": p.name,
        "namespace": p.namespace,
        "uid": p.uid,
        "containers": [_container(c) for c in p.containers],
        "init_containers": [_container(c) for c in p.init_containers],
        "annotations": dict(p.annotations),
        "labels": dict(p.labels),
        "restart_policy": p.restart_policy,
        "termination_grace_period_s": p.termination_grace_period_s,
        "source": p.source,
        "source_digest": p.source_digest,
        "run_as": None if p.run_as is None else {
            "uid": p.run_as.uid, "gid": p.run_as.gid, "groups": list(p.run_as.groups)},
        **({"resource_claims": dict(p.resource_claims)} if p.resource_claims else {}),
        **({"rlimits": [[r.resource, r.soft, r.hard] for r in p.rlimits]} if p.rlimits else {}),
    }


def _run_as_from(d: Any) -> RunAs | None:
    """A record written before users has no ``run_as``: the pod runs as root."""
    if d is None:
        return None
    return RunAs(_opt_int(d["uid"]), _opt_int(d["gid"]), tuple(int(g) for g in d["groups"]))


def _rlimits_from(d: Any) -> tuple[RLimit, ...]:
    """A record written before limits were recorded has none: the pod gets the system's defaults."""
    return tuple(RLimit(_sym(r[0]), _opt_int(r[1]), _opt_int(r[2])) for r in d or ())


def _opt_int(v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {v!r}")
    return v


def _sym(v: Any) -> str:
    """A string that many records repeat (namespace, kinds, names, reasons): one copy
    held for all (``agent.sharedvalues``; a restart decodes 10,000 records). One call,
    not three: a restart makes ~14 of these per pod (issue 37 item 17)."""
    if isinstance(v, str):
        return intern(v)  # what agent.sharedvalues.text is, without its call
    raise TypeError(f"expected a string, got {v!r}")


def _str_map(v: Any) -> dict[str, str]:
    """A checked string map, shared with every record holding an equal one."""
    if not isinstance(v, dict):
        raise TypeError(f"expected a mapping, got {v!r}")
    return shared_map({_str(k): _str(x) for k, x in v.items()})


def _resources_from(d: dict[str, Any]) -> Resources:
    ext = d["extended"]
    if not isinstance(ext, dict):
        raise TypeError("extended must be a mapping")
    return Resources(
        cpu_request_milli=_opt_int(d["cpu_request_milli"]),
        cpu_limit_milli=_opt_int(d["cpu_limit_milli"]),
        memory_request_bytes=_opt_int(d["memory_request_bytes"]),
        memory_limit_bytes=_opt_int(d["memory_limit_bytes"]),
        extended={_str(k): int(_opt_int(v) or 0) for k, v in ext.items()},
        hugepages={_str(k): int(_opt_int(v) or 0) for k, v in _mapping(d.get("hugepages", {})).items()},
        claims=tuple(map(_str, d.get("claims", ()))),
    )


def _mapping(v: Any) -> dict[Any, Any]:
    if not isinstance(v, dict):
        raise TypeError(f"expected a mapping, got {v!r}")
    return v


def _container_from(d: dict[str, Any]) -> ContainerSpec:
    return ContainerSpec(
        name=_sym(d["name"]),
        command=tuple(map(_sym, d["command"])),
        args=tuple(map(_sym, d["args"])),
        env=tuple(EnvVar(_sym(n), _str(v)) for n, v in d["env"]),
        working_dir=None if d["working_dir"] is None else _str(d["working_dir"]),
        resources=_resources_from(d["resources"]),
        kind=_sym(d["kind"]),
    )


def spec_from_json(d: dict[str, Any]) -> PodSpec:
    return PodSpec(
        # the pod's name and uid are the same objects as the CPU entries' and the devices'
        name=_sym(d["name"]),
        namespace=_sym(d["namespace"]),
        uid=_sym(d["uid"]),
        containers=tuple(map(_container_from, d["containers"])),
        init_containers=tuple(map(_container_from, d["init_containers"])),
        annotations=_str_map(d["annotations"]),
        labels=_str_map(d["labels"]),
        restart_policy=_sym(d["restart_policy"]),
        termination_grace_period_s=int(_opt_int(d["termination_grace_period_s"]) or 0),
        source=_sym(d["source"]),
        source_digest=_sym(d["source_digest"]),
        run_as=_run_as_from(d.get("run_as")),
        resource_claims=_str_map(d.get("resource_claims", {})),
        rlimits=_rlimits_from(d.get("rlimits")),
    )


def _grant(g: DeviceGrant) -> dict[str, Any]:
    return {
        "envs": dict(g.envs),
        "mounts": [[m.container_path, m.host_path, m.read_only] for m in g.mounts],
        "devices": [[d.container_path, d.host_path, d.permissions] for d in g.devices],
        "annotations": dict(g.annotations),
        "cdi_devices": list(g.cdi_devices),
    }


def _grant_from(d: dict[str, Any]) -> DeviceGrant:
    return DeviceGrant(
        envs=_str_map(d["envs"]),
        mounts=tuple(Mount(_str(c), _str(h), bool(ro)) for c, h, ro in d["mounts"]),
        devices=tuple(DeviceNode(_str(c), _str(h), _str(p)) for c, h, p in d["devices"]),
        annotations=_str_map(d["annotations"]),
        cdi_devices=tuple(map(_str, d["cdi_devices"])),
    )


def _assignment(a: ContainerAssignment) -> dict[str, Any]:
    return {
        "name": a.name,
        "cpus": str(a.cpus),
        "mems": None if a.mems is None else str(a.mems),
        "numa_affinity": None if a.numa_affinity is None else sorted(a.numa_affinity),
        "devices": {r: list(ids) for r, ids in sorted(a.devices.items())},
        "grant": _grant(a.grant),
    }


def _assignment_from(d: dict[str, Any]) -> ContainerAssignment:
    aff = d["numa_affinity"]
    return ContainerAssignment(
        name=_sym(d["name"]),
        cpus=CPUSet.parse(_str(d["cpus"])),
        mems=None if d["mems"] is None else CPUSet.parse(_str(d["mems"])),
        numa_affinity=None if aff is None else frozenset(int(_opt_int(n) or 0) for n in aff),
        devices={_sym(r): tuple(map(_str, ids)) for r, ids in d["devices"].items()},
        grant=_grant_from(d["grant"]),
    )


def pod_to_json(p: AdmittedPod) -> dict[str, Any]:
    return {
        "spec": spec_to_json(p.spec),
        "qos": p.qos,
        "assignments": [_assignment(a) for a in p.assignments.values()],
        "admitted_at": p.admitted_at,
    }


def pod_from_json(d: dict[str, Any]) -> AdmittedPod:
    assignments = [_assignment_from(a) for a in d["assignments"]]
    at = d["admitted_at"]
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        raise TypeError("admitted_at must be a number")
    return AdmittedPod(
        spec=spec_from_json(d["spec"]),
        qos=_sym(d["qos"]),
        assignments={a.name: a for a in assignments},
        admitted_at=float(at),
    )


def _cstatus(c: ContainerStatus) -> dict[str, Any]:
    return {
        "name": c.name,
        "state": c.state.value,
        "reason": c.reason,
        "message": c.message,
        "pid": c.pid,
        "started_at": c.started_at,
        "finished_at": c.finished_at,
        "exit_code": c.exit_code,
        "restart_count": c.restart_count,
    }


def _opt_float(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"expected a number, got {v!r}")
    return float(v)


def _cstatus_from(d: dict[str, Any]) -> ContainerStatus:
    return ContainerStatus(
        name=_sym(d["name"]),
        state=ContainerState(d["state"]),
        reason=_sym(d["reason"]),
        message=_sym(d["message"]),
        pid=_opt_int(d["pid"]),
        started_at=_opt_float(d["started_at"]),
        finished_at=_opt_float(d["finished_at"]),
        exit_code=_opt_int(d["exit_code"]),
        restart_count=int(_opt_int(d["restart_count"]) or 0),
    )


def status_to_json(s: PodStatus) -> dict[str, Any]:
    return {
        "phase": s.phase.value,
        "reason": s.reason,
        "message": s.message,
        "containers": [_cstatus(c) for c in s.containers],
        "started_at": s.started_at,
        "finished_at": s.finished_at,
    }


def status_from_json(d: dict[str, Any]) -> PodStatus:
    return PodStatus(
        phase=PodPhase(d["phase"]),
        reason=_sym(d["reason"]),
        message=_sym(d["message"]),
        containers=tuple(_cstatus_from(c) for c in d["containers"]),
        started_at=_opt_float(d["started_at"]),
        finished_at=_opt_float(d["finished_at"]),
    )
