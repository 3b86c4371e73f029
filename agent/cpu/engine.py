"""The policy plus its side effects: checkpoint after every change (awaited
before a call returns), cgroup enforcement (in the background), metrics.

Both the gRPC servicer and in-process callers (standalone mode, the
``cpu_policy`` service) go through here, so they share one behaviour. Runs on
the daemon's single asyncio loop; blocking file work goes to the default
executor, coalesced (``agent.statefile.Coalescer``) so a burst of calls costs
one write, never two at once; a failed write fails the calls waiting on it and
is retried by the next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from agent.cpu.checkpoint import CheckpointStore
from agent.cpu.errors import PolicyError
from agent.cpu.metrics import CHECKPOINT_WRITES, DURATION, FAILURES, REQUESTS, publish_state
from agent.cpu.policy import AllocateResult, DynamicPolicy, HintsResult, Request
from agent.cpu.state import AllocationInfo, PolicyState
from agent.statefile import Coalescer

__all__ = ["CPUEngine"]

log = logging.getLogger("hwagent.cpu")
T = TypeVar("T")


class CPUEngine:
    def __init__(
        self,
        policy: DynamicPolicy,
        store: CheckpointStore | None,
        on_enforce: Callable[[PolicyState], None] | None = None,
    ) -> None:
        self.policy = policy
        self.store = store
        self.on_enforce = on_enforce
        self.persist: Coalescer[PolicyState] = Coalescer(self._save, "checkpoint_write", logger=log)
        policy.listeners.append(self._changed)
        publish_state(policy.state)

    def _save(self, st: PolicyState) -> None:
        if self.store is not None:
            self.store.save(st)
            CHECKPOINT_WRITES.inc()

    def _changed(self, st: PolicyState) -> None:
        publish_state(st)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # called off-loop (tools, tests): write through
            self._save(st)
            self.persist.completed_elsewhere()
        else:
            self.persist.submit(st)
        if self.on_enforce is not None:
            self.on_enforce(st)

    async def _call(self, op: str, fn: Callable[..., T], *args: Any) -> T:
        t0 = time.perf_counter()
        REQUESTS.labels(op).inc()
        try:
            result = fn(*args)
        except PolicyError as e:
            FAILURES.labels(op, e.reason).inc()
            raise
        await self.persist.wait()
        DURATION.labels(op).observe(time.perf_counter() - t0)
        return result

    async def hints(self, req: Request) -> HintsResult:
        return await self._call("hints", self.policy.get_topology_hints, req)

    async def allocate(self, req: Request) -> AllocateResult:
        return await self._call("allocate", self.policy.allocate, req)

    async def remove_pod(self, uid: str) -> bool:
        return await self._call("remove_pod", self.policy.remove_pod, uid)

    async def resources_allocation(self) -> list[AllocationInfo]:
        return await self._call("get_resources_allocation", self.policy.resources_allocation)

    async def bind_cgroup(self, uid: str, container: str, path: str | None) -> None:
        await self._call("bind_cgroup", self.policy.set_cgroup_path, uid, container, path)
