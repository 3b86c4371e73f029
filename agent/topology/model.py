"""The machine's CPU and memory topology as plain, frozen data.

Nothing in here touches the filesystem: readers (``agent.topology.sysfs``) build
a ``Topology``; the CPU policy, device manager and CLI only consume it. That
split is what lets the same policy code run against the live machine, the
hwloc fixture snapshots and synthetic shapes in tests.

Identity rules, chosen because kernel ids are not globally unique:
- a *package* is identified by ``physical_package_id``;
- a *core* is identified by (package, die, ``core_id``) *within* a
  thread-sibling set. The kernel ABI calls ``core_id`` the core's identifier
  and ``thread_siblings``/``core_cpus`` the CPUs of the same core, but the two
  disagree on AMD compute-unit parts (families 15h/16h), where the two integer
  cores of a unit are each other's thread siblings with different core ids:
  those are two cores sharing a front end, not SMT, and hwloc counts them so.
  The sibling set still splits a ``core_id`` that repeats inside one package
  (Magny-Cours reports core ids per die on kernels without ``die_id``);
- a *cache instance* is identified by (level, type, sharing set);
- a *group* (cluster, compute unit, die) is a set of cores sharing something
  below the package; it is listed only where it holds several cores and fewer
  than its package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from agent.cpuset import CPUSet

__all__ = ["CPU", "Core", "Cache", "Group", "GROUP_KINDS", "NUMANode", "Topology", "synthetic"]


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


#: group kinds from the outermost in: a die holds clusters, a cluster holds compute units
GROUP_KINDS = ("die", "cluster", "compute_unit")


@dataclass(frozen=True)
class Group:
    """Cores that share a level between package and core.

    ``die``: the kernel's ``die_id`` (several dies per package);
    ``cluster``: ``cluster_id`` (arm64 clusters, Intel hybrid module groups);
    ``compute_unit``: a thread-sibling set that spans several core ids (AMD
    compute units). ``id`` is the kernel's id where it gives one.
    """

    kind: str
    package_id: int
    id: int | None
    cpus: CPUSet


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

    @cached_property
    def _cpus_by_package(self) -> dict[int, CPUSet]:
        ids: dict[int, list[int]] = {}
        for c in self.cpus:
            ids.setdefault(c.package_id, []).append(c.id)
        return {p: CPUSet(v) for p, v in ids.items()}

    def cpus_of_package(self, package_id: int) -> CPUSet:
        """Once per topology: a walk over every CPU per package made the text tree O(packages x CPUs)."""
        return self._cpus_by_package.get(package_id, CPUSet())

    # -- cores ----------------------------------------------------------------
    @cached_property
    def cores(self) -> tuple[Core, ...]:
        """Physical cores ordered by their first CPU (see the identity rules above)."""
        members: dict[tuple[int, int, int, CPUSet], list[int]] = {}
        online = self.online
        for c in self.cpus:
            sib = c.thread_siblings & online if c.thread_siblings else CPUSet([c.id])
            members.setdefault((c.package_id, c.die_id, c.core_id, sib), []).append(c.id)
        cores = [Core(pkg, die, core_id, CPUSet(ids)) for (pkg, die, core_id, _), ids in members.items()]
        return tuple(sorted(cores, key=lambda k: k.first_cpu))

    @cached_property
    def _core_of_cpu(self) -> dict[int, Core]:
        return {cpu: core for core in self.cores for cpu in core.cpus}

    def core_of(self, cpu_id: int) -> Core:
        return self._core_of_cpu[cpu_id]

    def siblings(self, cpu_id: int) -> CPUSet:
        """All hardware threads of cpu_id's core, cpu_id included."""
        return self.core_of(cpu_id).cpus

    @cached_property
    def _cores_by_package(self) -> dict[int, tuple[Core, ...]]:
        out: dict[int, list[Core]] = {}
        for k in self.cores:
            out.setdefault(k.package_id, []).append(k)
        return {p: tuple(v) for p, v in out.items()}

    def cores_of_package(self, package_id: int) -> tuple[Core, ...]:
        return self._cores_by_package.get(package_id, ())

    @cached_property
    def threads_per_core(self) -> int:
        return max((len(k.cpus) for k in self.cores), default=1)

    # -- groups ---------------------------------------------------------------
    @cached_property
    def groups(self) -> tuple[Group, ...]:
        """Dies, clusters and compute units that say something (see ``Group``).

        A level is kept where a group holds more than one core and fewer than
        its package: x86 reports every core as its own cluster, and a
        one-die package is its die; neither adds a level worth showing.
        """
        core_of = self._core_of_cpu
        out: list[Group] = []
        for kind in GROUP_KINDS:
            sets: dict[tuple[int, int | None, CPUSet | int | None], list[int]] = {}
            for c in self.cpus:
                if kind == "die":
                    key: tuple = (c.package_id, c.die_id, None)
                elif kind == "cluster":
                    if c.cluster_id is None:
                        continue
                    key = (c.package_id, c.cluster_id, c.die_id)
                else:
                    key = (c.package_id, None, c.thread_siblings & self.online)
                sets.setdefault(key, []).append(c.id)
            for (pkg, gid, _), ids in sets.items():
                cpus = CPUSet(ids)
                ncores = len({core_of[i] for i in ids})
                if 1 < ncores < len(self.cores_of_package(pkg)) or (kind == "compute_unit" and ncores > 1):
                    out.append(Group(kind, pkg, gid, cpus))
        return tuple(sorted(out, key=lambda g: (GROUP_KINDS.index(g.kind), g.cpus.first())))

    def groups_of_kind(self, kind: str) -> tuple[Group, ...]:
        return tuple(g for g in self.groups if g.kind == kind)

    @cached_property
    def logical_package(self) -> dict[int, int]:
        """Kernel package id -> its position (0, 1, ...): ids like 512 or 1024 mean nothing to a reader."""
        return {p: i for i, p in enumerate(self.package_ids)}

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

    @cached_property
    def _numa_by_package(self) -> dict[int, tuple[int, ...]]:
        """Package -> the nodes holding one of its online CPUs, from one walk over the nodes' CPUs
        (a node-by-package intersection was 8,000 set operations on 64 nodes x 128 packages)."""
        by_id = self._by_id
        out: dict[int, set[int]] = {}
        for n in self.numa_nodes:
            for cpu_id in n.cpus:
                cpu = by_id.get(cpu_id)
                if cpu is not None:
                    out.setdefault(cpu.package_id, set()).add(n.id)
        return {p: tuple(sorted(v)) for p, v in out.items()}

    def numa_nodes_of_package(self, package_id: int) -> tuple[int, ...]:
        """NUMA nodes with at least one CPU in this package, ascending."""
        return self._numa_by_package.get(package_id, ())

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
    for *_where, ids in cores:
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

