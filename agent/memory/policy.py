"""The static memory policy: which NUMA nodes a container's memory and hugepages come from.

Pure: no I/O, no clock. The kubelet's memory manager (static policy) is the
model, its semantics kept:

- per node and resource (``memory``, ``hugepages-<size>``): total, system
  reserved, allocatable (= total - reserved; for ``memory`` also minus the
  node's hugepage pools), allocated; free = allocatable - allocated;
- hints: every group of nodes whose free amounts hold every requested resource;
  preferred = as few nodes as the *allocatable* amounts could ever need (so a
  busy machine does not make a two-node group look preferred);
- a node that holds a multi-node allocation is only used again with exactly that
  group, and a node that holds a single-node allocation is never joined into a
  group (``cells``, upstream's ``Cells``/``NumberOfAssignments``);
- allocate on the topology manager's merged affinity; when it cannot hold the
  request, on the best hint that contains it; "any" = the best hint; memory is
  taken fill-first from the nodes in order.

Beyond upstream: each block records its per-node split (so a release gives back
exactly what was taken, and views show it), a pod may ask for its hugepages to
be spread evenly over every node that has the page size (``spread_hugepages``),
and a refusal names the per-node free amounts. A refused call changes nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agent.contracts.hints import TopologyHint, format_affinity
from agent.contracts.memory import HUGEPAGES_PREFIX, MEMORY_RESOURCE, MemoryBlock, MemoryRefused, MemoryRequest, NodeMemory
from agent.memory.words import memory_phrase
from agent.memory.sysfs import MachineMemory, hugepage_resource, page_size_of
from agent.quantity import format_bytes

__all__ = [
    "Capacity",
    "Assignment",
    "StaticPolicy",
    "build_capacity",
    "fmt_bytes",
    "MAX_GROUP_NODES",
]

#: above this many nodes, groups are only single nodes and all nodes (2^n masks otherwise)
MAX_GROUP_NODES = 8


#: bytes as a quantity (512Mi), the one formatter (agent.quantity)
fmt_bytes = format_bytes


@dataclass(frozen=True)
class Capacity:
    """One node's resource before any pod: total, reserved for the system, allocatable."""

    total: int
    system_reserved: int
    allocatable: int
    page_size: int = 0


def build_capacity(
    machine: MachineMemory,
    reserved: Mapping[int, Mapping[str, int]],
    system_hugepages: Mapping[str, int] | None = None,
) -> dict[int, dict[str, Capacity]]:
    """Per node, per resource capacity; ValueError naming the problem when the
    reservations do not fit the machine (a node it lacks, a page size a node
    lacks, more reserved than there is)."""
    known = {n.node for n in machine.nodes}
    for node, table in reserved.items():
        if node not in known:
            raise ValueError(f"reserved_memory names NUMA node {node}; this machine has nodes "
                             f"{format_affinity(known)}")
        truth = machine.node(node)
        assert truth is not None
        for name in table:
            if name != MEMORY_RESOURCE and page_size_of(name) not in truth.hugepages:
                raise ValueError(f"reserved_memory: node {node} has no {name} pool")
    hp_split = _split_system_hugepages(machine, system_hugepages or {})
    out: dict[int, dict[str, Capacity]] = {}
    for n in machine.nodes:
        caps: dict[str, Capacity] = {}
        pools_total = 0
        for size, pool in sorted(n.hugepages.items()):
            name = hugepage_resource(size)
            total = pool.total_bytes
            pools_total += total
            res = reserved.get(n.node, {}).get(name, 0) + hp_split.get((n.node, name), 0)
            if res > total:
                raise ValueError(f"node {n.node}: {fmt_bytes(res)} of {name} reserved for the system, "
                                 f"but the pool holds {fmt_bytes(total)}")
            caps[name] = Capacity(total, res, total - res, size)
        res = reserved.get(n.node, {}).get(MEMORY_RESOURCE, 0)
        if res > n.mem_total:
            raise ValueError(f"node {n.node}: {fmt_bytes(res)} of memory reserved for the system, "
                             f"but the node has {fmt_bytes(n.mem_total)}")
        caps[MEMORY_RESOURCE] = Capacity(n.mem_total, res, max(0, n.mem_total - res - pools_total))
        out[n.node] = caps
    return out


def _split_system_hugepages(machine: MachineMemory, wanted: Mapping[str, int]) -> dict[tuple[int, str], int]:
    """A node-level hugepage reservation, page by page round-robin over the nodes
    that have pages of that size (so no node is emptied first)."""
    out: dict[tuple[int, str], int] = {}
    for name, size_bytes in wanted.items():
        size = page_size_of(name)
        if size is None or size not in machine.page_sizes:
            raise ValueError(f"system_reserved_hugepages: this machine has no {name} pages")
        if size_bytes % size:
            raise ValueError(f"system_reserved_hugepages: {name}={fmt_bytes(size_bytes)} is not a whole number "
                             f"of {fmt_bytes(size)} pages")
        left = {n.node: n.hugepages[size].total_bytes // size for n in machine.nodes if size in n.hugepages}
        pages = size_bytes // size
        if pages > sum(left.values()):
            raise ValueError(f"system_reserved_hugepages: {name}={fmt_bytes(size_bytes)} is more than the "
                             f"{fmt_bytes(sum(left.values()) * size)} configured on this machine")
        taken = dict.fromkeys(left, 0)
        while pages:
            for node in sorted(left):
                if pages and taken[node] < left[node]:
                    taken[node] += 1
                    pages -= 1
        for node, t in taken.items():
            if t:
                out[(node, name)] = t * size
    return out


@dataclass(frozen=True)
class Assignment:
    """One placed container: its blocks, its memory affinity, whether its pages were spread."""

    pod_uid: str
    container: str
    blocks: tuple[MemoryBlock, ...]
    affinity: frozenset[int]
    spread: bool = False
    pod_namespace: str = ""
    pod_name: str = ""

    def usage(self) -> Iterable[tuple[int, str, int]]:
        for b in self.blocks:
            for node, size in b.per_node:
                yield node, b.resource, size


@dataclass
class StaticPolicy:
    """The placed containers and the per-node usage they add up to (derived, kept in step)."""

    capacity: dict[int, dict[str, Capacity]]
    assignments: dict[tuple[str, str], Assignment] = field(default_factory=dict)
    #: node -> resource -> allocated bytes
    used: dict[int, dict[str, int]] = field(default_factory=dict)
    #: node -> containers whose (non-spread) affinity includes it
    count: dict[int, int] = field(default_factory=dict)
    #: node -> the group it is bound in (upstream ``Cells``; itself when unused)
    cells: dict[int, frozenset[int]] = field(default_factory=dict)
    #: pod uid -> its placed containers (a release looks its pod up, not every container)
    by_pod: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for node in self.capacity:
            self.used.setdefault(node, {})
            self.count.setdefault(node, 0)
            self.cells.setdefault(node, frozenset({node}))
        self._nodes = tuple(sorted(self.capacity))

    # -- state ----------------------------------------------------------------------------

    def copy(self) -> StaticPolicy:
        c = StaticPolicy.__new__(StaticPolicy)
        c.capacity = self.capacity
        c.assignments = dict(self.assignments)
        c.used = {n: dict(t) for n, t in self.used.items()}
        c.count = dict(self.count)
        c.cells = dict(self.cells)
        c.by_pod = dict(self.by_pod)
        c._nodes = self._nodes
        c._mask_cache = self._all_masks()
        return c

    def _add(self, a: Assignment) -> None:
        self.assignments[(a.pod_uid, a.container)] = a
        self.by_pod[a.pod_uid] = self.by_pod.get(a.pod_uid, ()) + (a.container,)
        for node, res, size in a.usage():
            t = self.used.setdefault(node, {})
            t[res] = t.get(res, 0) + size
        for node in a.affinity:
            self.count[node] = self.count.get(node, 0) + 1
            self.cells[node] = a.affinity

    def _drop(self, a: Assignment) -> None:
        del self.assignments[(a.pod_uid, a.container)]
        rest = tuple(c for c in self.by_pod.get(a.pod_uid, ()) if c != a.container)
        if rest:
            self.by_pod[a.pod_uid] = rest
        else:
            self.by_pod.pop(a.pod_uid, None)
        for node, res, size in a.usage():
            t = self.used[node]
            t[res] -= size
        for node in a.affinity:
            self.count[node] -= 1
            if self.count[node] == 0:
                self.cells[node] = frozenset({node})

    def restore(self, assignments: Iterable[Assignment]) -> list[tuple[Assignment, str]]:
        """Take saved assignments, in order; the ones that no longer fit this
        machine (a node gone, a pool shrunk) are left out and returned with why."""
        dropped: list[tuple[Assignment, str]] = []
        for a in assignments:
            why = self._misfit(a)
            if why is None:
                self._add(a)
            else:
                dropped.append((a, why))
        return dropped

    def _misfit(self, a: Assignment) -> str | None:
        need: dict[tuple[int, str], int] = {}
        for node, res, size in a.usage():
            need[(node, res)] = need.get((node, res), 0) + size
        for (node, res), size in sorted(need.items()):
            cap = self.capacity.get(node, {}).get(res)
            if cap is None:
                return f"node {node} has no {res} now"
            if self.used[node].get(res, 0) + size > cap.allocatable:
                return (f"{res} on node {node}: {fmt_bytes(size)} held, {fmt_bytes(self._free(node, res))} "
                        f"free of {fmt_bytes(cap.allocatable)} allocatable now")
        return None

    def remove_pod(self, pod_uid: str) -> bool:
        held = self.held(pod_uid)
        for a in held:
            self._drop(a)
        return bool(held)

    def held(self, pod_uid: str) -> list[Assignment]:
        """The pod's placed containers."""
        return [self.assignments[(pod_uid, c)] for c in self.by_pod.get(pod_uid, ())]

    # -- reads ----------------------------------------------------------------------------

    def blocks(self, pod_uid: str, container: str) -> tuple[MemoryBlock, ...]:
        a = self.assignments.get((pod_uid, container))
        return a.blocks if a is not None else ()

    def pod_uids(self) -> set[str]:
        return set(self.by_pod)

    def _free(self, node: int, res: str) -> int:
        cap = self.capacity[node].get(res)
        return 0 if cap is None else cap.allocatable - self.used[node].get(res, 0)

    def nodes(self) -> tuple[NodeMemory, ...]:
        out = []
        for node in self._nodes:
            caps = self.capacity[node]
            for res in sorted(caps, key=_resource_order):
                c = caps[res]
                out.append(NodeMemory(node, res, c.total, c.system_reserved, c.allocatable,
                                      self.used[node].get(res, 0)))
        return tuple(out)

    def free_summary(self, res: str, nodes: Iterable[int] | None = None) -> str:
        """``node 0: 512 MiB memory, node 1: 0 × 2 MiB pages`` — what a refusal names."""
        ns = self._nodes if nodes is None else sorted(nodes)
        return ", ".join(f"node {n}: {memory_phrase(res, self._free(n, res))}" for n in ns if n in self.capacity)

    # -- requests -------------------------------------------------------------------------

    def _checked(self, req: MemoryRequest) -> tuple[dict[str, int], dict[str, int]]:
        """(resources placed by the hints, spread hugepages); MemoryRefused for a
        resource the machine does not know or a size that is not whole pages."""
        known: set[str] = {MEMORY_RESOURCE}
        for caps in self.capacity.values():
            known.update(caps)
        placed: dict[str, int] = {}
        spread: dict[str, int] = {}
        for res, size in sorted(req.requests.items(), key=lambda kv: _resource_order(kv[0])):
            if size <= 0:
                continue
            if res != MEMORY_RESOURCE:
                page = page_size_of(res)
                if page is None:
                    raise MemoryRefused("unknown_resource", f"{res}: not a memory resource (memory or hugepages-<size>)")
                if res not in known:
                    offered = ", ".join(sorted(r for r in known if r.startswith(HUGEPAGES_PREFIX))) or "none"
                    raise MemoryRefused("unknown_page_size",
                                        f"{res}: this machine has no {fmt_bytes(page)} pages (page sizes: {offered})")
                if size % page:
                    raise MemoryRefused("partial_page", f"{res}: {fmt_bytes(size)} is not a whole number of "
                                                        f"{fmt_bytes(page)} pages")
                if not any(self.capacity[n].get(res, Capacity(0, 0, 0)).allocatable for n in self._nodes):
                    raise MemoryRefused("not_configured",
                                        f"{res}: no pages of this size are configured for pods on any NUMA node "
                                        f"(nr_hugepages is 0, or all reserved); reserve some first: echo N > "
                                        f"/sys/kernel/mm/hugepages/hugepages-{page >> 10}kB/nr_hugepages",
                                        free=self.free_summary(res))
                if req.spread_hugepages:
                    spread[res] = size
                    continue
            placed[res] = size
        return placed, spread

    def _masks(self) -> Iterable[frozenset[int]]:
        nodes = self._nodes
        if len(nodes) > MAX_GROUP_NODES:
            yield from (frozenset({n}) for n in nodes)
            yield frozenset(nodes)
            return
        for k in range(1, len(nodes) + 1):
            for combo in itertools.combinations(nodes, k):
                yield frozenset(combo)

    def _group_allowed(self, mask: frozenset[int]) -> bool:
        if len(mask) == 1:
            (node,) = mask
            return len(self.cells[node]) <= 1
        for node in mask:
            if self.count.get(node, 0) > 0 and (len(self.cells[node]) == 1 or self.cells[node] != mask):
                return False
        return True

    def _holds(self, mask: frozenset[int], placed: Mapping[str, int]) -> bool:
        return all(sum(self._free(n, r) for n in mask) >= size for r, size in placed.items())

    def _calculate(self, placed: Mapping[str, int]) -> list[TopologyHint]:
        """Every allowed group that holds ``placed`` now; preferred = as few nodes as the
        allocatable amounts need. Per-node amounts are looked up once per call, not per mask."""
        need = list(placed.items())
        alloc = {r: {n: c.allocatable if (c := self.capacity[n].get(r)) is not None else 0 for n in self._nodes}
                 for r, _ in need}
        free = {r: {n: alloc[r][n] - self.used[n].get(r, 0) for n in self._nodes} for r, _ in need}
        found: list[frozenset[int]] = []
        smallest = len(self._nodes)
        for mask in self._all_masks():
            if any(sum(alloc[r][n] for n in mask) < size for r, size in need):
                continue
            smallest = min(smallest, len(mask))
            if all(sum(free[r][n] for n in mask) >= size for r, size in need) and self._group_allowed(mask):
                found.append(mask)
        return [TopologyHint(m, len(m) == smallest) for m in found]

    def _all_masks(self) -> list[frozenset[int]]:
        masks: list[frozenset[int]] | None = getattr(self, "_mask_cache", None)
        if masks is None:
            masks = list(self._masks())
            self._mask_cache = masks
        return masks

    def hints(self, req: MemoryRequest) -> list[TopologyHint] | None:
        """The hints for ``req`` (the same for each of its resources); None when it
        places nothing NUMA-aligned; [] when no group of nodes can hold it now."""
        held = self.assignments.get((req.pod_uid, req.container_name))
        if held is not None:
            return [TopologyHint(held.affinity, True)] if held.affinity else None
        placed, _ = self._checked(req)
        if not placed:
            return None
        return self._calculate(placed)

    def allocate(self, req: MemoryRequest) -> tuple[MemoryBlock, ...]:
        """Place ``req`` (see the module docstring); MemoryRefused with nothing changed."""
        held = self.assignments.get((req.pod_uid, req.container_name))
        if held is not None:
            return held.blocks
        placed, spread = self._checked(req)
        if not placed and not spread:
            return ()
        mask: frozenset[int] = frozenset()
        blocks: list[MemoryBlock] = []
        if placed:
            mask = self._choose(req, placed)
            for res, size in placed.items():
                blocks.append(self._fill(res, size, mask))
        for res, size in spread.items():
            blocks.append(self._spread(req, res, size))
        a = Assignment(req.pod_uid, req.container_name, tuple(blocks), mask, bool(spread),
                       req.pod_namespace, req.pod_name)
        self._add(a)
        return a.blocks

    def _choose(self, req: MemoryRequest, placed: Mapping[str, int]) -> frozenset[int]:
        want = req.hint.affinity if req.hint is not None else None
        if want is not None and want - set(self._nodes):
            raise MemoryRefused("unknown_node", f"memory: affinity {format_affinity(want)} names NUMA nodes this "
                                                f"machine lacks (nodes {format_affinity(self._nodes)})")
        if want is not None and self._group_allowed(want) and self._holds(want, placed):
            return want
        hints = self._calculate(placed)
        fitting = [h for h in hints if want is None or want <= (h.affinity or frozenset())]
        if not fitting:
            raise MemoryRefused(*self._why_not(req, placed, want))
        best = min(fitting, key=lambda h: (not h.preferred, len(h.nodes), h.nodes))
        if want is not None and req.hint is not None and req.hint.preferred and not best.preferred:
            raise MemoryRefused(*self._why_not(req, placed, want))
        assert best.affinity is not None
        return best.affinity

    def _why_not(self, req: MemoryRequest, placed: Mapping[str, int], want: frozenset[int] | None
                 ) -> tuple[str, str, str]:
        nodes = sorted(want) if want is not None else list(self._nodes)
        where = f"NUMA nodes {format_affinity(nodes)}" if want is not None else "any group of NUMA nodes"
        who = f"container {req.container_name!r}"
        for res, size in placed.items():
            if res != MEMORY_RESOURCE and want is not None:
                missing = [n for n in nodes if not self.capacity[n].get(res, Capacity(0, 0, 0)).allocatable]
                if len(missing) == len(nodes):
                    return ("not_configured",
                            f"{res}: {who} asks {fmt_bytes(size)} but no {res} pages are configured on "
                            f"{where}", self.free_summary(res))
            if want is not None and sum(self._free(n, res) for n in nodes) < size or \
                    want is None and not any(self._holds(m, {res: size}) for m in self._masks()):
                return ("insufficient_" + ("memory" if res == MEMORY_RESOURCE else "hugepages"),
                        f"{res}: {who} asks {fmt_bytes(size)}, more than {where} can give", self.free_summary(res))
        return ("numa_group",
                f"memory: {who} fits no NUMA node group that respects the groups already in use "
                f"(a node in a multi-node group serves only that group)",
                "; ".join(self.free_summary(r) for r in placed))

    def _fill(self, res: str, size: int, mask: frozenset[int]) -> MemoryBlock:
        left = size
        split: list[tuple[int, int]] = []
        for node in sorted(mask):
            take = min(left, max(0, self._free(node, res)))
            if take:
                split.append((node, take))
                left -= take
        assert left == 0, "checked by _holds"
        return MemoryBlock(res, size, tuple(sorted(mask)), tuple(split))

    def _spread(self, req: MemoryRequest, res: str, size: int) -> MemoryBlock:
        """Pages dealt round-robin over every node with free pages of this size."""
        page = page_size_of(res)
        assert page is not None
        free = {n: self._free(n, res) // page for n in self._nodes if self._free(n, res) >= page}
        pages = size // page
        if pages > sum(free.values()):
            raise MemoryRefused("insufficient_hugepages",
                                f"{res}: container {req.container_name!r} asks {fmt_bytes(size)} spread over the "
                                f"NUMA nodes", free=self.free_summary(res))
        taken = dict.fromkeys(free, 0)
        while pages:
            for node in sorted(free):
                if pages and taken[node] < free[node]:
                    taken[node] += 1
                    pages -= 1
        split = tuple((n, t * page) for n, t in sorted(taken.items()) if t)
        return MemoryBlock(res, size, tuple(n for n, _ in split), split)


def _resource_order(res: str) -> tuple[int, int]:
    return (0, 0) if res == MEMORY_RESOURCE else (1, page_size_of(res) or 0)
