"""Admission over fixture machines, in one process and without sockets: the real
CPU policy with its journal, the real device manager with its journal and an
in-process device plugin, the real topology manager and the registry on disk.
``restart()`` builds every component again from what is on disk, as a daemon
restart would (then ``reconcile_after_restore``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.api.deviceplugin.v1beta1 import api_pb2 as dp_pb
from agent.cpu.calculator import TopoIndex
from agent.cpu.checkpoint import CheckpointStore
from agent.cpu.durable import DurablePolicy
from agent.cpu.policy import DynamicPolicy, PolicyOptions
from agent.cpu.pools import DedicatedNuma
from agent.devicemanager.manager import DeviceManager
from agent.contracts.devices import Device
from agent.topology.model import Topology, synthetic
from agent.topologymanager import TopologyManager, TopologyManagerConfig
from agent.workloads.admission import Workloads
from agent.workloads.registry import Registry
from agent.workloads.store import PodFileStore

__all__ = ["Machine", "Node", "InProcessPlugin", "MACHINES"]


class InProcessPlugin:
    """A device plugin without a socket: its devices, an Allocate answer naming
    them, and optionally a GetPreferredAllocation (highest ids first, so it
    differs from the host's own order and a decision that ignored it would show)."""

    def __init__(self, resource: str, devices: list[Device], preferred: bool = False) -> None:
        self.resource, self.socket = resource, f"in-process-{resource}"
        self.options = dp_pb.DevicePluginOptions(get_preferred_allocation_available=preferred)
        self.stop_time = None
        self.stopped = False
        self._devices = devices
        self.allocate_calls: list[list[str]] = []

    def run(self, on_snapshot, on_closed) -> None:
        on_snapshot(self, self._devices)

    async def get_preferred_allocation(
        self, available: Collection[str], must_include: Collection[str], size: int
    ) -> list[str]:
        rest = sorted(set(available) - set(must_include), reverse=True)
        return (sorted(must_include) + rest)[:size]

    async def allocate(self, ids: Sequence[str]) -> dp_pb.ContainerAllocateResponse:
        self.allocate_calls.append(list(ids))
        return dp_pb.ContainerAllocateResponse(envs={"DEVS": ",".join(ids)})

    async def pre_start_container(self, device_ids: Sequence[str], timeout: float) -> None:
        pass

    async def close(self) -> None:
        pass


@dataclass(frozen=True)
class Machine:
    name: str
    topology: Topology
    #: resource -> its devices (id, healthy, NUMA nodes)
    devices: Mapping[str, Sequence[Device]]
    reserved: int = 0
    #: resources whose plugin offers GetPreferredAllocation
    preferred: frozenset[str] = frozenset()


def _devs(prefix: str, per_node: Mapping[int, int], none: int = 0) -> list[Device]:
    out = [Device(f"{prefix}{n}-{i}", True, (n,)) for n, k in per_node.items() for i in range(k)]
    return out + [Device(f"{prefix}x-{i}", True, ()) for i in range(none)]


MACHINES = (
    # 2 NUMA nodes x 4 CPUs, one device per node
    Machine("2n", synthetic(sockets=2, numa_per_socket=1, cores_per_numa=2, threads_per_core=2),
            {"example.com/dev": _devs("d", {0: 1, 1: 1})}),
    # 4 NUMA nodes (2 per socket) x 4 CPUs, one reserved; two resources, one with a preference and a
    # device without topology
    Machine("4n", synthetic(sockets=2, numa_per_socket=2, cores_per_numa=2, threads_per_core=2),
            {"example.com/dev": _devs("d", {0: 2, 1: 1, 2: 1, 3: 2}),
             "example.com/nic": _devs("n", {0: 1, 3: 1}, none=1)},
            reserved=1, preferred=frozenset({"example.com/nic"})),
    # 4 NUMA nodes x 6 CPUs on one socket
    Machine("4n1s", synthetic(sockets=1, numa_per_socket=4, cores_per_numa=3, threads_per_core=2),
            {"example.com/dev": _devs("d", {0: 1, 1: 2, 2: 1, 3: 1})}),
)


@dataclass
class Node:
    """One machine's admission, its state under ``base``."""

    base: Path
    machine: Machine
    policy: str
    scope: str
    #: the CPU policy's dedicated_numa ("whole-node": Katalyst's 14.4)
    dedicated_numa: DedicatedNuma = "whole-node"
    #: the memory manager's per-node capacity (None: no memory manager runs)
    memory_capacity: dict[int, dict[str, Any]] | None = None
    memory: Any = field(init=False, default=None)
    workloads: Workloads = field(init=False)
    cpu_policy: DynamicPolicy = field(init=False)
    manager: DeviceManager = field(init=False)
    plugins: dict[str, InProcessPlugin] = field(init=False, default_factory=dict)
    _engine: Any = field(init=False, default=None)

    async def start(self) -> Node:
        topo = self.machine.topology
        store = CheckpointStore(self.base / "cpu", online=TopoIndex(topo).all)
        state = store.load()
        pol = DynamicPolicy(topo, PolicyOptions(reserved_count=self.machine.reserved,
                                                 dedicated_numa=self.dedicated_numa), state=state)
        self._engine = DurablePolicy(pol, store)
        store.save(pol.state)
        self.cpu_policy = pol
        cpu = self._engine
        self.manager = DeviceManager(numa_ids=topo.numa_ids, checkpoint_path=self.base / "devices" / "checkpoint")
        (self.base / "devices").mkdir(parents=True, exist_ok=True)
        await self.manager.start()
        self.plugins = {}
        for resource, devs in self.machine.devices.items():
            plugin = InProcessPlugin(resource, list(devs), preferred=resource in self.machine.preferred)
            self.plugins[resource] = plugin
            self.manager.attach(plugin)
        pods = PodFileStore(self.base / "workloads" / "pods", root_dir=self.base)
        registry = Registry(pods)
        registry.restore(pods.load())
        tm = TopologyManager.for_topology(TopologyManagerConfig(policy=self.policy, scope=self.scope), topo)
        self.memory = None
        if self.memory_capacity is not None:
            from agent.memory.checkpoint import MemoryStore
            from agent.memory.manager import MemoryManager
            from agent.memory.policy import StaticPolicy

            mstore = MemoryStore(self.base / "memory")
            mpolicy = StaticPolicy(self.memory_capacity)
            mpolicy.restore(mstore.load())
            self.memory = MemoryManager(mpolicy, mstore)
            mstore.save(dict(mpolicy.assignments), lambda: dict(self.memory.policy.assignments))
        self.workloads = Workloads(registry, tm, topo.numa_ids, cpu_policy=cpu, device_manager=self.manager,
                                   memory_manager=self.memory, machine_memory_bytes=16 << 30)
        self.manager.active_pods = self.workloads
        await self.workloads.reconcile_after_restore()
        return self

    async def stop(self) -> None:
        await self.workloads.drain()
        await self._engine.wait_durable()
        await self._engine.store.journal.close()
        await self.manager.stop()
        if self.memory is not None:
            await self.memory.store.journal.close()

    async def restart(self) -> None:
        await self.stop()
        await self.start()
