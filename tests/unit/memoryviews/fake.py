"""A small stand-in for the memory manager's read side (``MemoryAllocations``),
so the views (pod-resources, status, metrics, describe) are tested against the
contract alone, never against ``agent.memory``'s classes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from agent.contracts.hints import TopologyHint
from agent.contracts.memory import MemoryBlock, MemoryRefused, MemoryRequest, NodeMemory

MI = 1 << 20
GI = 1 << 30


@dataclass
class FakeMemory:
    """Blocks per (pod UID, container) and per-node accounting, as given."""

    held: dict[tuple[str, str], tuple[MemoryBlock, ...]] = field(default_factory=dict)
    accounting: tuple[NodeMemory, ...] = ()

    def blocks(self, pod_uid: str, container: str) -> tuple[MemoryBlock, ...]:
        return self.held.get((pod_uid, container), ())

    def all_blocks(self) -> Mapping[tuple[str, str], tuple[MemoryBlock, ...]]:
        return dict(self.held)

    def nodes(self) -> tuple[NodeMemory, ...]:
        return self.accounting


def two_nodes() -> FakeMemory:
    """Two NUMA nodes of 4 GiB memory each (256 MiB reserved on node 0), 2 MiB pages
    on both (1 GiB on node 1 none allocatable: all reserved), no 1 GiB pages on node 1."""
    return FakeMemory(
        held={
            ("u1", "app"): (MemoryBlock("memory", 512 * MI, (0,), ((0, 512 * MI),)),
                            MemoryBlock("hugepages-2Mi", 64 * MI, (0,), ((0, 64 * MI),))),
            ("u2", "big"): (MemoryBlock("memory", 5 * GI, (0, 1), ((0, 3 * GI), (1, 2 * GI))),),
        },
        accounting=(
            NodeMemory(0, "hugepages-2Mi", 128 * MI, 0, 128 * MI, 64 * MI),
            NodeMemory(0, "memory", 4 * GI, 256 * MI, 4 * GI - 256 * MI, 512 * MI + 3 * GI),
            NodeMemory(1, "hugepages-1Gi", GI, GI, 0, 0),
            NodeMemory(1, "hugepages-2Mi", 64 * MI, 0, 64 * MI, 0),
            NodeMemory(1, "memory", 4 * GI, 0, 4 * GI, 2 * GI),
        ),
    )


class FakeAllocator(FakeMemory):
    """A first-fit stand-in for the write side (``MemoryAllocator``): single nodes
    that fit every requested resource are the preferred hints; an allocation takes
    each resource from the hint's nodes in order, or refuses naming per-node free
    amounts, changing nothing. Enough for the plugin's wire to be tested alone."""

    def _free(self, node: int, resource: str) -> int:
        return next((n.free for n in self.accounting if n.node == node and n.resource == resource), 0)

    def _node_ids(self) -> list[int]:
        return sorted({n.node for n in self.accounting})

    def _fits(self, nodes: list[int], req: MemoryRequest) -> bool:
        return all(sum(self._free(n, r) for n in nodes) >= v for r, v in req.requests.items())

    async def get_topology_hints(self, req: MemoryRequest) -> list[TopologyHint] | None:
        if not any(req.requests.values()):
            return None
        hints = [TopologyHint(frozenset({n}), True) for n in self._node_ids() if self._fits([n], req)]
        if self._fits(self._node_ids(), req):
            hints.append(TopologyHint(frozenset(self._node_ids()), not hints))
        return hints

    def plan(self):  # pragma: no cover - admission's, not the plugin's
        raise NotImplementedError

    async def allocate(self, req: MemoryRequest) -> tuple[MemoryBlock, ...]:
        if (req.pod_uid, req.container_name) in self.held:
            return self.held[(req.pod_uid, req.container_name)]
        nodes = sorted(req.hint.affinity) if req.hint is not None and req.hint.affinity else None
        if nodes is None:
            nodes = next(([n] for n in self._node_ids() if self._fits([n], req)), self._node_ids())
        if not self._fits(nodes, req):
            free = "; ".join(f"{r} " + " ".join(f"{n}={self._free(n, r)}" for n in self._node_ids())
                             for r in sorted(req.requests))
            raise MemoryRefused("insufficient", f"not enough on NUMA {nodes}: free per node: {free}")
        blocks, accounting = [], list(self.accounting)
        for r, want in sorted(req.requests.items()):
            if not want:
                continue
            split = []
            for n in nodes:
                take = min(want - sum(s for _, s in split), self._free(n, r))
                if take:
                    split.append((n, take))
                    accounting = [replace(a, allocated=a.allocated + take) if (a.node, a.resource) == (n, r) else a
                                  for a in accounting]
            blocks.append(MemoryBlock(r, want, tuple(n for n, _ in split), tuple(split)))
        self.accounting = tuple(accounting)
        self.held[(req.pod_uid, req.container_name)] = tuple(blocks)
        return tuple(blocks)

    async def release_pod(self, pod_uid: str) -> bool:
        gone = [k for k in self.held if k[0] == pod_uid]
        accounting = list(self.accounting)
        for k in gone:
            for b in self.held.pop(k):
                for n, size in b.per_node:
                    accounting = [replace(a, allocated=a.allocated - size) if (a.node, a.resource) == (n, b.resource)
                                  else a for a in accounting]
        self.accounting = tuple(accounting)
        return bool(gone)


def empty_allocator() -> FakeAllocator:
    """``two_nodes``' machine with nothing allocated."""
    return FakeAllocator(accounting=tuple(replace(n, allocated=0) for n in two_nodes().accounting))
