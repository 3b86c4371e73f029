"""The machine's CPU and memory topology as plain, frozen data.

Nothing in here touches the filesystem: readers (``agent.topology.sysfs``) build
a ``Topology``; the CPU policy, device manager and CLI only consume it. That
split is what lets the same policy code run against the live machine, the
hwloc fixture snapshots and synthetic shapes in tests.

Identity rules, chosen because kernel ids are not globally unique:
- a *package* is identified by ``physical_package_id``;
- a *core* is identified by its thread-sibling set (``core_id`` repeats across
  packages and dies, and on some arm/s390 machines even within one);
- a *cache instance* is identified by (level, type, sharing set).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from agent.cpuset import CPUSet

__all__ = ["CPU", "Core", "Cache", "NUMANode", "Topology", "synthetic"]


@dataclass(frozen=True)
class CPU:
    """One logical CPU (a hardware thread, hwloc's PU)."""

    id: int
    package_id: int
    core_id: int
    die_id: int = 0
    cluster_id: int | None = None
    numa_node: int | None = None
    thread_siblings: CPUSet = field(default_factory=CPUSet)


@dataclass(frozen=True)
class Core:
    """A physical core: the CPUs that share its execution units."""

    package_id: int
    die_id: int
    core_id: int
    cpus: CPUSet

    @property
    def first_cpu(self) -> int:
        return self.cpus.first()


@dataclass(frozen=True)
class Cache:
    """One cache instance and the CPUs that share it."""

    level: int
    type: str  # "Unified", "Data", "Instruction"
    size_bytes: int | None
    cpus: CPUSet
    id: int | None = None
    line_size: int | None = None
    ways: int | None = None


@dataclass(frozen=True)
class NUMANode:
    """A NUMA node. ``cpus`` is empty for memory-only nodes (HBM, CXL, GPU memory)."""

    id: int
    cpus: CPUSet
    memory_bytes: int | None
    #: distance to every node, keyed by node id (the node's own entry is usually 10)
    distances: dict[int, int] = field(default_factory=dict, compare=False, hash=False)

    @property
    def memory_only(self) -> bool:
        return not self.cpus


@dataclass(frozen=True)
class Topology:
    """What the kernel says about CPUs, cores, caches and NUMA on one machine.

    ``cpus`` holds the *online* CPUs whose topology could be read. Offline CPUs
    appear only in ``offline``/``possible``: the kernel hides their topology.
    """

    cpus: tuple[CPU, ...]
    numa_nodes: tuple[NUMANode, ...] = ()
    caches: tuple[Cache, ...] = ()
    possible: CPUSet = field(default_factory=CPUSet)
    present: CPUSet = field(default_factory=CPUSet)
    offline: CPUSet = field(default_factory=CPUSet)
    isolated: CPUSet = field(default_factory=CPUSet)
    #: CPUs / memory nodes the reading process's own cgroup (cpuset) allows;
    #: None when not read (fixture roots) or not restricted knowledge.
    allowed_cpus: CPUSet | None = None
    allowed_mems: CPUSet | None = None
    #: human-readable notes on anything that was missing or odd while reading
    warnings: tuple[str, ...] = ()
    source: str = ""

    # -- sets -----------------------------------------------------------------
    @cached_property
    def online(self) -> CPUSet:
        return CPUSet(c.id for c in self.cpus)

    @cached_property
    def _by_id(self) -> dict[int, CPU]:
        return {c.id: c for c in self.cpus}

    def cpu(self, cpu_id: int) -> CPU:
        try:
            return self._by_id[cpu_id]
        except KeyError:
            raise KeyError(f"cpu {cpu_id} is not an online cpu of this topology") from None

    # -- packages -------------------------------------------------------------
    @cached_property
    def package_ids(self) -> tuple[int, ...]:
        return tuple(sorted({c.package_id for c in self.cpus}))

    def cpus_of_package(self, package_id: int) -> CPUSet:
        return CPUSet(c.id for c in self.cpus if c.package_id == package_id)

    # -- cores ----------------------------------------------------------------
    @cached_property
    def cores(self) -> tuple[Core, ...]:
        """Physical cores ordered by their first CPU."""
        seen: dict[CPUSet, Core] = {}
        for c in self.cpus:
            sib = c.thread_siblings & self.online if c.thread_siblings else CPUSet([c.id])
            if c.id not in sib:
                sib = sib | CPUSet([c.id])
            if sib not in seen:
                seen[sib] = Core(c.package_id, c.die_id, c.core_id, sib)
        return tuple(sorted(seen.values(), key=lambda k: k.first_cpu))

    @cached_property
    def _core_of_cpu(self) -> dict[int, Core]:
        return {cpu: core for core in self.cores for cpu in core.cpus}

    def core_of(self, cpu_id: int) -> Core:
        return self._core_of_cpu[cpu_id]

    def siblings(self, cpu_id: int) -> CPUSet:
        """All hardware threads of cpu_id's core, cpu_id included."""
        return self.core_of(cpu_id).cpus

    def cores_of_package(self, package_id: int) -> tuple[Core, ...]:
        return tuple(k for k in self.cores if k.package_id == package_id)

    @property
    def threads_per_core(self) -> int:
        return max((len(k.cpus) for k in self.cores), default=1)

    # -- NUMA -----------------------------------------------------------------
    @cached_property
    def _numa_by_id(self) -> dict[int, NUMANode]:
        return {n.id: n for n in self.numa_nodes}

    def numa_node(self, node_id: int) -> NUMANode:
        return self._numa_by_id[node_id]

    @cached_property
    def numa_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self._numa_by_id))

    def cpus_of_numa(self, node_id: int) -> CPUSet:
        return self._numa_by_id[node_id].cpus & self.online

    def numa_of_cpu(self, cpu_id: int) -> int | None:
        return self.cpu(cpu_id).numa_node

    def numa_nodes_of_package(self, package_id: int) -> tuple[int, ...]:
        """NUMA nodes with at least one CPU in this package, ascending."""
        pkg = self.cpus_of_package(package_id)
        return tuple(n.id for n in sorted(self.numa_nodes, key=lambda n: n.id) if n.cpus & pkg)

    def package_of_numa(self, node_id: int) -> int | None:
        """The package holding a node's CPUs (None for memory-only nodes)."""
        cpus = self.cpus_of_numa(node_id)
        if not cpus:
            return None
        return self.cpu(cpus.first()).package_id

    def distance(self, a: int, b: int) -> int | None:
        return self._numa_by_id[a].distances.get(b)

    # -- caches ---------------------------------------------------------------
    @cached_property
    def last_level_caches(self) -> tuple[Cache, ...]:
        """The highest-level unified (or data) caches, one per instance."""
        if not self.caches:
            return ()
        top = max(c.level for c in self.caches)
        return tuple(
            sorted(
                (c for c in self.caches if c.level == top and c.type != "Instruction"),
                key=lambda c: c.cpus.first() if c.cpus else -1,
            )
        )

    def llc_of(self, cpu_id: int) -> Cache | None:
        for c in self.last_level_caches:
            if cpu_id in c.cpus:
                return c
        return None

    def caches_of_level(self, level: int) -> tuple[Cache, ...]:
        return tuple(c for c in self.caches if c.level == level)


def synthetic(
    *,
    sockets: int = 2,
    numa_per_socket: int = 2,
    cores_per_numa: int = 2,
    threads_per_core: int = 2,
    memory_per_numa: int = 8 << 30,
    memory_only_nodes: int = 0,
    l3_per_numa: bool = True,
    sibling_numbering: str = "spread",
) -> Topology:
    """Build a regular topology for tests and benches.

    ``sibling_numbering="spread"`` numbers the second thread of every core after
    all first threads, as x86 firmware does (cpu 0 and cpu N/2 are siblings);
    ``"adjacent"`` makes siblings consecutive (0,1), as on many arm/POWER boxes.
    Distances are 10 local, 11 within a socket, 21 across sockets, 30 to
    memory-only nodes.
    """
    total_cores = sockets * numa_per_socket * cores_per_numa
    cpus: list[CPU] = []
    cores: list[tuple[int, int, int, list[int]]] = []  # (pkg, numa, core_id, cpu ids)
    core_index = 0
    for s in range(sockets):
        for n_in_s in range(numa_per_socket):
            numa = s * numa_per_socket + n_in_s
            for c in range(cores_per_numa):
                if sibling_numbering == "spread":
                    ids = [core_index + t * total_cores for t in range(threads_per_core)]
                else:
                    ids = [core_index * threads_per_core + t for t in range(threads_per_core)]
                cores.append((s, numa, n_in_s * cores_per_numa + c, ids))
                core_index += 1
    for pkg, numa, core_id, ids in cores:
        sib = CPUSet(ids)
        for i in ids:
            cpus.append(CPU(id=i, package_id=pkg, core_id=core_id, numa_node=numa, thread_siblings=sib))
    cpus.sort(key=lambda c: c.id)

    n_cpu_nodes = sockets * numa_per_socket
    node_ids = list(range(n_cpu_nodes + memory_only_nodes))

    def dist(a: int, b: int) -> int:
        if a == b:
            return 10
        if a >= n_cpu_nodes or b >= n_cpu_nodes:
            return 30
        return 11 if a // numa_per_socket == b // numa_per_socket else 21

    nodes = []
    for nid in node_ids:
        ncpus = CPUSet(c.id for c in cpus if c.numa_node == nid)
        nodes.append(
            NUMANode(
                id=nid,
                cpus=ncpus,
                memory_bytes=memory_per_numa,
                distances={b: dist(nid, b) for b in node_ids},
            )
        )
    caches: list[Cache] = []
    for pkg, numa, core_id, ids in cores:
        caches.append(Cache(level=1, type="Data", size_bytes=48 << 10, cpus=CPUSet(ids)))
        caches.append(Cache(level=2, type="Unified", size_bytes=1 << 20, cpus=CPUSet(ids)))
    if l3_per_numa:
        for n in nodes[:n_cpu_nodes]:
            caches.append(Cache(level=3, type="Unified", size_bytes=32 << 20, cpus=n.cpus))
    else:
        for s in range(sockets):
            caches.append(
                Cache(
                    level=3,
                    type="Unified",
                    size_bytes=32 << 20,
                    cpus=CPUSet(c.id for c in cpus if c.package_id == s),
                )
            )
    allc = CPUSet(c.id for c in cpus)
    return Topology(
        cpus=tuple(cpus),
        numa_nodes=tuple(nodes),
        caches=tuple(caches),
        possible=allc,
        present=allc,
        source="synthetic",
    )


def union_cpus(nodes: Iterable[NUMANode]) -> CPUSet:
    return CPUSet.union_all(n.cpus for n in nodes)
