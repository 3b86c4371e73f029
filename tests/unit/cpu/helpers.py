"""Builders shared by the cpu tests: the upstream 16-CPU fixture and requests."""

from __future__ import annotations

import json

from agent.contracts.hints import TopologyHint
from agent.cpu.policy import DynamicPolicy, PolicyOptions
from agent.contracts.cpu import Request
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY
from agent.topology.model import synthetic


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def upstream_topology():
    """16 CPUs / 2 sockets / 4 NUMA; cpu k and k+8 are siblings (upstream fixture)."""
    return synthetic(sockets=2, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)


def make_policy(clock: Clock | None = None, topo=None, **opts) -> DynamicPolicy:
    o = {"reserved_count": 2, **opts}
    return DynamicPolicy(topo or upstream_topology(), PolicyOptions(**o), clock=clock or Clock())


def req(
    uid: str = "pod1",
    container: str = "c1",
    qos: str | None = None,
    cpus: float = 2,
    binding: bool | None = None,
    exclusive: bool | None = None,
    hint: tuple[int, ...] | None = None,
    ctype: str = "MAIN",
    extra_annotations: dict | None = None,
    pool: str | None = None,
) -> Request:
    ann: dict[str, str] = {}
    if qos:
        ann[QOS_KEY] = qos
    mem = {}
    if binding is not None:
        mem["numa_binding"] = "true" if binding else "false"
    if exclusive is not None:
        mem["numa_exclusive"] = "true" if exclusive else "false"
    if mem:
        ann[MEMORY_ENHANCEMENT_KEY] = json.dumps(mem)
    if pool:
        ann["katalyst.kubewharf.io/cpu_enhancement"] = json.dumps({"cpuset_pool": pool})
    ann.update(extra_annotations or {})
    return Request(
        pod_uid=uid,
        pod_namespace="ns",
        pod_name=f"name-{uid}",
        container_name=container,
        container_type=ctype,
        hint=TopologyHint(frozenset(hint), True) if hint is not None else None,
        resource_requests={"cpu": cpus},
        annotations=ann,
    )
