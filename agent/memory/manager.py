"""The memory manager: the static policy plus its journal, as ``MemoryAllocator``.

Every change (an allocation, a pod's release, a reconciliation that drops a pod)
appends one record in the same loop step as the change in memory and is
answered after the fdatasync that holds it (``agent.journal``, as the CPU
policy's ``DurablePolicy``); a record that cannot be made durable undoes its
change and the call is refused with nothing changed. Reads answer from memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from agent.contracts.hints import TopologyHint
from agent.contracts.memory import MemoryBlock, MemoryRefused, MemoryRequest, NodeMemory
from agent.eventlog import get_logger
from agent.journal import JournalError
from agent.journalbatch import defer
from agent.memory.checkpoint import MemoryStore, encode_drop, encode_put
from agent.memory.policy import Assignment, Capacity, StaticPolicy

__all__ = ["MemoryManager", "MemoryPlan", "Dropped"]

log = get_logger("hwagent.memory")

#: (assignment, why) for each container a reconciliation left out
Dropped = list[tuple[Assignment, str]]


class MemoryPlan:
    """``MemoryPlanner``: the policy copied for one admission decision."""

    def __init__(self, policy: StaticPolicy) -> None:
        self.policy = policy.copy()

    def hints(self, req: MemoryRequest) -> list[TopologyHint] | None:
        return self.policy.hints(req)

    def allocate(self, req: MemoryRequest) -> tuple[MemoryBlock, ...]:
        return self.policy.allocate(req)


class MemoryManager:
    """``agent.contracts.memory.MemoryAllocator`` over a ``StaticPolicy``."""

    def __init__(self, policy: StaticPolicy, store: MemoryStore | None = None,
                 on_change: Callable[[], None] | None = None) -> None:
        self.policy = policy
        self.store = store
        #: called after every change in memory (metrics, enforcement kicks)
        self.on_change = on_change
        #: re-reads the machine and reconciles (the component's ``rescan_once``); None: nothing to read
        self.rescan: Callable[[], Awaitable[object]] | None = None
        if store is not None:
            store.journal.capture = lambda: dict(self.policy.assignments)

    # -- changes ----------------------------------------------------------------------------

    async def _persist(self, record: bytes, undo: Callable[[], None]) -> None:
        if self.on_change is not None:
            self.on_change()
        if self.store is None:
            return
        fut = self.store.journal.append(record, undo=undo)
        if defer([fut]):  # the caller settles many changes at once (agent.journalbatch)
            return
        try:
            await fut
        except JournalError as e:
            raise MemoryRefused("state_not_persisted",
                                f"memory manager state could not be persisted, nothing was changed: {e}") from None

    async def get_topology_hints(self, req: MemoryRequest) -> list[TopologyHint] | None:
        return self.policy.hints(req)

    def plan(self) -> MemoryPlan:
        return MemoryPlan(self.policy)

    async def allocate(self, req: MemoryRequest) -> tuple[MemoryBlock, ...]:
        key = (req.pod_uid, req.container_name)
        if key in self.policy.assignments:
            return self.policy.assignments[key].blocks
        blocks = self.policy.allocate(req)
        a = self.policy.assignments.get(key)
        if a is None:
            return blocks  # nothing placed (no memory resources)
        await self._persist(encode_put([a]), undo=lambda: self._undo_put(a))
        return blocks

    def _undo_put(self, a: Assignment) -> None:
        if self.policy.assignments.get((a.pod_uid, a.container)) is a:
            self.policy._drop(a)
        if self.on_change is not None:
            self.on_change()

    async def release_pod(self, pod_uid: str) -> bool:
        held = self.policy.held(pod_uid)
        if not held:
            return False
        self.policy.remove_pod(pod_uid)
        await self._persist(encode_drop([pod_uid]), undo=lambda: self._undo_drop(held))
        return True

    def _undo_drop(self, held: list[Assignment]) -> None:
        for a in held:
            if (a.pod_uid, a.container) not in self.policy.assignments:
                self.policy._add(a)
        if self.on_change is not None:
            self.on_change()

    def reconcile(self, capacity: dict[int, dict[str, Capacity]]) -> Dropped:
        """The machine changed (hot-plug, a hugepage pool resized): the policy is
        rebuilt on the new capacity and the containers that no longer fit are left
        out (their whole pod), returned with why. Off-loop callers (start) save a
        snapshot after; on the loop a drop record is appended."""
        fresh = StaticPolicy(capacity)
        dropped = fresh.restore(self.policy.assignments.values())
        gone = {a.pod_uid for a, _ in dropped}
        if gone:
            extra = [a for uid in gone for a in fresh.held(uid)]
            for a in extra:
                fresh._drop(a)
                dropped.append((a, "another container of its pod no longer fits"))
        old, self.policy = self.policy, fresh
        if gone and self.store is not None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass  # start: the caller writes the snapshot
            else:
                fut = self.store.journal.append(encode_drop(sorted(gone)), undo=lambda: self._restore(old))
                fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        if self.on_change is not None:
            self.on_change()
        return dropped

    async def refresh(self) -> bool:
        """``MemoryAllocator.refresh``: the pools read again now; a read that fails keeps them
        as they were (logged), and says False."""
        if self.rescan is None:
            return False
        before = self.policy.capacity
        try:
            await self.rescan()
        except Exception as e:  # noqa: BLE001 - the refusal stands on the pools already known
            log.warning("memory pools not read again", error=str(e))
            return False
        return self.policy.capacity != before

    def _restore(self, old: StaticPolicy) -> None:
        self.policy = old

    # -- reads --------------------------------------------------------------------------------

    def blocks(self, pod_uid: str, container: str) -> tuple[MemoryBlock, ...]:
        return self.policy.blocks(pod_uid, container)

    def all_blocks(self) -> Mapping[tuple[str, str], tuple[MemoryBlock, ...]]:
        return {k: a.blocks for k, a in self.policy.assignments.items()}

    def nodes(self) -> tuple[NodeMemory, ...]:
        return self.policy.nodes()

    def affinity(self, pod_uid: str, container: str) -> frozenset[int] | None:
        """The container's memory nodes (its placed resources' nodes and its spread pages' nodes)."""
        a = self.policy.assignments.get((pod_uid, container))
        if a is None:
            return None
        nodes = set(a.affinity)
        for b in a.blocks:
            nodes.update(b.numa_nodes)
        return frozenset(nodes)
