"""A small stand-in for the memory manager's read side (``MemoryAllocations``),
so the views (pod-resources, status, metrics, describe) are tested against the
contract alone, never against ``agent.memory``'s classes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.contracts.memory import MemoryBlock, NodeMemory

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
