"""The policy plus its side effects: a journal record per change (awaited
before a changing call returns), cgroup enforcement (in the background),
metrics.

Both the gRPC servicer and in-process callers (standalone mode, the
``CPU_POLICY`` handle) go through here, so they share one behaviour. Runs on
the daemon's single asyncio loop. Each committed change appends one small
record to the policy's journal (``agent.journal``) in the same loop step;
concurrent calls share one fdatasync (group commit) and each is answered after
the sync that holds its record. When a record cannot be made durable the
change is undone (memory back to the state before it, and so for every change
queued after it), the call fails with ``UNAVAILABLE`` ("state not persisted",
retryable: the request was fine, the node's disk was not) and the journal is
cut back, so a refused call leaves memory and disk as they were.

Read-only calls (hints, GetResourcesAllocation) never wait for a write: they
answer from memory, which may include a change whose record is being synced
right now (it is then either acknowledged or undone, with its caller told).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

from agent.cpu.checkpoint import CheckpointStore, encode_change
from agent.cpu.errors import UNAVAILABLE, PolicyError
from agent.cpu.metrics import CHECKPOINT_WRITES, DURATION, FAILURES, REQUESTS, publish_state
from agent.cpu.policy import DynamicPolicy
from agent.contracts.cpu import AllocateResult, HintsResult, Request
from agent.cpu.state import PolicyState
from agent.contracts.cpu import AllocationInfo
from agent.eventlog import get_logger
from agent.journal import JournalError

__all__ = ["DurablePolicy"]

log = get_logger("hwagent.cpu")
T = TypeVar("T")


class DurablePolicy:
    """The policy whose every change is on disk before its caller hears of it."""

    def __init__(
        self,
        policy: DynamicPolicy,
        store: CheckpointStore | None,
        on_enforce: Callable[[PolicyState], None] | None = None,
    ) -> None:
        self.policy = policy
        self.store = store
        self.on_enforce = on_enforce
        self._last = policy.state  # the state the next record is relative to
        self._collect: list[asyncio.Future[None]] | None = None
        self._background: set[asyncio.Future[None]] = set()
        if store is not None:
            store.journal.capture = lambda: self.policy.state
        policy.listeners.append(self._changed)
        publish_state(policy.state)

    def _changed(self, st: PolicyState) -> None:
        prev, self._last = self._last, st
        publish_state(st)
        if self.store is not None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # called off-loop (tools, tests): write a snapshot through
                self.store.save(st)
                CHECKPOINT_WRITES.inc()
            else:
                record = encode_change(prev, st, self.policy.last_change)
                fut = self.store.journal.append(record, undo=lambda: self._undo(prev))
                CHECKPOINT_WRITES.inc()
                if self._collect is not None:
                    self._collect.append(fut)
                else:  # a change no caller waits for (ramp-up, residual cleanup): failures are logged there
                    self._background.add(fut)
                    fut.add_done_callback(self._background_done)
        if self.on_enforce is not None:
            self.on_enforce(st)

    def _background_done(self, fut: asyncio.Future[None]) -> None:
        self._background.discard(fut)
        if not fut.cancelled():
            fut.exception()  # retrieved: the journal logged it, the change was undone

    def _undo(self, prev: PolicyState) -> None:
        """A change could not be made durable: memory goes back to before it
        (undos run newest first, so a failed batch ends at the last durable state)."""
        self.policy.reset_state(prev)
        self._last = prev
        publish_state(prev)
        if self.on_enforce is not None:
            self.on_enforce(prev)

    async def _call(self, op: str, fn: Callable[..., T], *args: Any, wait: bool = True) -> T:
        t0 = time.perf_counter()
        REQUESTS.labels(op).inc()
        futs: list[asyncio.Future[None]] = []
        self._collect = futs if wait else None
        try:
            result = fn(*args)
        except PolicyError as e:
            FAILURES.labels(op, e.reason).inc()
            raise
        finally:
            self._collect = None
        if wait and not futs and op == "allocate" and self.store is not None \
                and self.store.journal.durable_seq < self.store.journal.seq:
            futs.append(asyncio.ensure_future(self.store.journal.barrier()))  # answered from a pending change?
        if futs:
            try:
                await asyncio.gather(*futs)
            except JournalError as e:
                FAILURES.labels(op, "state_not_persisted").inc()
                raise PolicyError(UNAVAILABLE, "state_not_persisted",
                                  f"cpu policy state could not be persisted, nothing was changed: {e}") from None
        DURATION.labels(op).observe(time.perf_counter() - t0)
        return result

    async def wait_durable(self) -> None:
        """Every change made so far is durable or undone (periodic passes, stop)."""
        if self.store is not None:
            await self.store.journal.drain()

    async def hints(self, req: Request) -> HintsResult:
        return await self._call("hints", self.policy.get_topology_hints, req)

    async def allocate(self, req: Request) -> AllocateResult:
        return await self._call("allocate", self.policy.allocate, req)

    async def remove_pod(self, uid: str) -> bool:
        return await self._call("remove_pod", self.policy.remove_pod, uid)

    async def resources_allocation(self) -> list[AllocationInfo]:
        # read-only for the caller: the ramp-up it may complete is journaled in the background
        return await self._call("get_resources_allocation", self.policy.resources_allocation, wait=False)

    async def bind_cgroup(self, uid: str, container: str, path: str | None) -> None:
        await self._call("bind_cgroup", self.policy.set_cgroup_path, uid, container, path)
