"""The JSON shapes of a pod and of a dry run's decision, from the admission API's messages (pure).

One shape for every reader: the CLI API answers in it (``agent.workloads.cliapi``),
``hwagent ps --format json`` and ``describe --format json`` print it as they
get it, and ``agent.commands._podstatus`` reads it. Built from the gRPC
servicer's own messages, so the two APIs cannot drift apart.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["pod_json", "decision_json", "admit_json", "memory_json"]


def pod_json(pod: Any, record: bool = False) -> dict[str, Any]:
    """A ``pb.Pod`` as JSON; ``record``: with the registry's whole record and the runtime's
    cgroups and pids (``describe``), which ``ps`` does not need."""
    out: dict[str, Any] = {
        "name": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
        "qos": pod.qos,
        "phase": pod.phase,
        "reason": pod.reason,
        "message": pod.message,
        "source": pod.source,
        "admitted_at": pod.admitted_at,
        "released": pod.released,
        "containers": [
            {
                "name": c.name,
                "kind": c.kind,
                "cpu_ids": list(c.cpu_ids),
                "mems": list(c.mems) if c.mems else None,
                "numa_affinity": None if c.any_node else list(c.numa_affinity),
                "devices": [{"resource": d.resource, "id": d.id, "numa_nodes": list(d.numa_nodes)} for d in c.devices],
                "memory": [memory_json(b) for b in c.memory],
                "state": c.state,
                "reason": c.reason,
                "restart_count": c.restart_count,
                "pid": c.pid or None,
                "exit_code": c.exit_code if c.HasField("exit_code") else None,
            }
            for c in pod.containers
        ],
        "events": [{"time": e.time, "message": e.message} for e in pod.events],
    }
    if record:
        out["record"] = json.loads(pod.record_json) if pod.record_json else None
        # the runtime's answer at Get time (describe): cgroups and the pids in them now
        out["cgroup"] = pod.cgroup or None
        out["cgroup_dirs"] = list(pod.cgroup_dirs)
        for c, msg in zip(out["containers"], pod.containers, strict=True):
            c["cgroup"] = msg.cgroup or None
            c["pids"] = list(msg.pids)
    return out


def memory_json(b: Any) -> dict[str, Any]:
    """A ``pb.MemoryBlock``: the memory manager's block, its nodes and (when known) bytes per node."""
    return {"resource": b.resource, "size": b.size, "numa_nodes": list(b.numa_nodes),
            "per_node": {str(n): v for n, v in sorted(b.per_node.items())}}


def decision_json(d: Any) -> dict[str, Any]:
    """One container of a dry run (``pb.ContainerDecision``), in the shape of a pod's containers."""
    return {
        "name": d.name, "numa_nodes": None if d.any_node else list(d.numa_nodes), "preferred": d.preferred,
        "admit": d.admit, "reason": d.reason, "cpu_ids": list(d.cpu_ids), "mems": list(d.mems) if d.mems else None,
        "devices": [{"resource": x.resource, "id": x.id, "numa_nodes": list(x.numa_nodes)} for x in d.devices],
    }


def admit_json(resp: Any) -> dict[str, Any]:
    """A ``pb.AdmitResponse``: the admitted pod (None for a dry run), or the dry run's decisions."""
    return {
        "warnings": list(resp.warnings),
        "dry_run": resp.dry_run,
        "would_admit": resp.would_admit,
        "reason": resp.reason,
        "free": resp.free,
        "pod": pod_json(resp.pod) if resp.HasField("pod") else None,
        "containers": [decision_json(d) for d in resp.decisions],
    }
