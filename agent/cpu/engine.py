"""The policy plus its side effects: checkpoint after every change (awaited
before a call returns), cgroup enforcement (in the background), metrics.

Both the gRPC servicer and in-process callers (standalone mode, the
``cpu_policy`` service) go through here, so they share one behaviour. Runs on
the daemon's single asyncio loop; blocking file work goes to the default
executor, coalesced so a burst of calls costs one write, never two at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from agent.cpu.checkpoint import CheckpointStore
from agent.cpu.errors import PolicyError
from agent.cpu.metrics import CHECKPOINT_WRITES, DURATION, FAILURES, REQUESTS, publish_state
from agent.cpu.policy import AllocateResult, DynamicPolicy, HintsResult, Request
from agent.cpu.state import AllocationInfo, PolicyState

__all__ = ["Coalescer", "CPUEngine"]

log = logging.getLogger("hwagent.cpu")
T = TypeVar("T")


class Coalescer(Generic[T]):
    """Run ``work(latest)`` off-loop; callers that ``wait()`` resume once a run
    that started after their ``submit`` finished. Failed runs are retried by the
    next wait."""

    def __init__(self, work: Callable[[T], Any], name: str) -> None:
        self.work = work
        self.name = name
        self.gen = 0
        self.done = 0
        self.latest: T | None = None
        self.last_result: Any = None
        self._task: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def submit(self, value: T) -> None:
        self.gen += 1
        self.latest = value
        self._ensure()

    def _ensure(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait(self) -> None:
        target = self.gen
        if self.done >= target:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((target, fut))
        self._ensure()
        await fut

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self.done < self.gen:
            gen, value = self.gen, self.latest
            err: BaseException | None = None
            try:
                self.last_result = await loop.run_in_executor(None, self.work, value)
            except Exception as e:  # noqa: BLE001 - reported to waiters and logged
                err = e
                log.error("%s_failed error=%r", self.name, str(e))
            if err is None:
                self.done = gen
            keep = []
            for target, fut in self._waiters:
                if fut.done():
                    continue
                if err is not None:
                    fut.set_exception(err)
                elif target <= gen:
                    fut.set_result(None)
                else:
                    keep.append((target, fut))
            self._waiters = keep
            if err is not None:
                return

    async def drain(self) -> None:
        if self._task is not None:
            await asyncio.shield(self._task)


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
        self.persist = Coalescer(self._save, "checkpoint_write")
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
            self.persist.done = self.persist.gen = self.persist.gen + 1
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
