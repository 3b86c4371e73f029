"""A real admission pipeline in one process: the real CPU policy (with its
checkpoint), the real device manager with an independent test device plugin
over unix sockets, the real topology manager and the registry on disk."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.config import section_defaults
from agent.contracts import ACTIVE_PODS, RUNTIME
from agent.cpu.checkpoint import CheckpointStore
from agent.cpu.durable import DurablePolicy
from agent.cpu.policy import DynamicPolicy, PolicyOptions
from agent.contracts import DaemonContext
from agent.topology.model import Topology, synthetic
from agent.topologymanager import TopologyManager, TopologyManagerConfig
from agent.workloads.admission import Workloads
from agent.workloads.registry import Registry
from agent.workloads.store import PodFileStore
from tests.integration.devicemanager.fakeplugin import FakePlugin, dev
from tests.integration.devicemanager.harness import RES, host, until

__all__ = ["Env", "pipeline", "two_numa", "RES", "dev", "pod_yaml"]


def two_numa() -> Topology:
    """2 sockets x 1 NUMA node x 2 cores x 2 threads: cpus 0,1,4,5 on node 0; 2,3,6,7 on node 1."""
    return synthetic(sockets=2, numa_per_socket=1, cores_per_numa=2, threads_per_core=2)


@dataclass
class Env:
    workloads: Workloads
    registry: Registry
    policy: DynamicPolicy
    manager: Any
    plugin: FakePlugin
    #: the daemon's context: a test publishes what starts late (the runtime) as a component would
    ctx: DaemonContext
    base: Path
    topology: Topology


def pod_yaml(
    name: str,
    *,
    cpus: int | str = 2,
    qos: str = "dedicated_cores",
    binding: bool = True,
    devices: int = 1,
    containers: Sequence[str] = ("main",),
    resource: str = RES,
) -> str:
    ann = [f"katalyst.kubewharf.io/qos_level: {qos}"]
    if binding:
        ann.append("katalyst.kubewharf.io/memory_enhancement: '{\"numa_binding\": \"true\"}'")
    lines = [f"metadata:\n  name: {name}\n  annotations:"] + [f"    {a}" for a in ann] + ["spec:\n  containers:"]
    for c in containers:
        limits = f"cpu: '{cpus}'" + (f", {resource}: {devices}" if devices else "")
        lines.append(f"  - name: {c}\n    command: [sleep, '1000']\n    resources: {{limits: {{{limits}}}}}")
    return "\n".join(lines) + "\n"


@asynccontextmanager
async def pipeline(
    base: Path,
    *,
    topology: Topology | None = None,
    policy: str = "single-numa-node",
    scope: str = "container",
    devices: Sequence[Any] | None = None,
    pre_start_required: bool = True,
    reserved: int = 0,
):
    topo = topology or two_numa()
    devs = list(devices) if devices is not None else [dev("d0", numa=(0,)), dev("d1", numa=(1,))]
    async with host(base, numa_ids=topo.numa_ids) as h:
        plugin = FakePlugin(h.sock("fake.sock"), devs, pre_start_required=pre_start_required)
        await plugin.start()
        try:
            await plugin.register(h.socket, RES)
            await until(lambda: h.cap()[0] == len(devs), what="plugin devices")
            pol = DynamicPolicy(topo, PolicyOptions(reserved_count=reserved))
            store = CheckpointStore(base / "cpu")
            engine = DurablePolicy(pol, store)
            store.save(pol.state)  # a fresh snapshot and an open journal, as the CPU component does at start
            cpu = engine
            ctx = DaemonContext(section_defaults(), base, topo)
            registry = Registry(PodFileStore(base / "pods"))
            tm = TopologyManager(TopologyManagerConfig(policy=policy, scope=scope), topo.numa_ids)
            w = Workloads(registry, tm, topo.numa_ids, cpu_policy=cpu, device_manager=h.manager,
                          runtime_ref=ctx.deferred(RUNTIME), machine_memory_bytes=16 << 30)
            ctx.publish(ACTIVE_PODS, w)
            h.manager.active_pods = w
            yield Env(w, registry, pol, h.manager, plugin, ctx, base, topo)
            await w.drain()
            wait = getattr(engine, "wait_durable", None)  # the journal's name for it, once merged
            await (wait() if wait is not None else engine.persist.wait())
        finally:
            await plugin.stop()
