"""The policy plus its side effects: a journal record per change (awaited
before a changing call returns), cgroup enforcement (in the background),
metrics.

Both the gRPC servicer and in-process callers go through here, so they share
one behaviour: this is the ``CPUAllocator`` the CPU component publishes under
``CPU_POLICY`` itself (no forwarding layer between the contract and the policy). Runs on
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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from agent.cgroups.paths import DEFAULT_WORKLOAD_ROOTS, validate_rel_path
from agent.contracts.cpu import AllocateResult, AllocationInfo, HintsResult, Request
from agent.contracts.placement import Placement
from agent.cpu.checkpoint import CheckpointStore, encode_change
from agent.cpu.errors import UNAVAILABLE, PolicyError
from agent.cpu.metrics import CHECKPOINT_WRITES, DURATION, FAILURES, REQUESTS, publish_state
from agent.cpu.plan import PolicyPlan
from agent.cpu.policy import DynamicPolicy
from agent.cpu.state import PolicyState, moved_keys
from agent.cpuset import CPUSet
from agent.eventlog import get_logger
from agent.journal import JournalError
from agent.journalbatch import defer

__all__ = ["DurablePolicy"]

log = get_logger("hwagent.cpu")
T = TypeVar("T")


class DurablePolicy:
    """The policy whose every change is on disk before its caller hears of it
    (``agent.contracts.CPUAllocator``)."""

    def __init__(
        self,
        policy: DynamicPolicy,
        store: CheckpointStore | None,
        on_enforce: Callable[[PolicyState], None] | None = None,
        cgroup_roots: Sequence[str] = DEFAULT_WORKLOAD_ROOTS,
        write_bound: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        """``write_bound(path)``: the enforcer writes a just-bound cgroup's cpuset files
        now and answers True once they hold the container's placement (None: nothing
        enforces cgroups here)."""
        self.policy = policy
        self.store = store
        self.on_enforce = on_enforce
        self.write_bound = write_bound
        #: cgroups of containers the policy holds nothing of in a pod it holds (init
        #: containers): (pod uid, container) -> path; they run on the shared pool. In
        #: memory only: the launcher binds a re-attached container again after a restart
        self.followers: dict[tuple[str, str], str] = {}
        #: where a bound cgroup may live ([cgroups] workload roots): only those are enforced and killed
        self.cgroup_roots = tuple(cgroup_roots)
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
        if futs and not defer(futs):  # a caller that settles many changes at once waits for them itself
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

    # -- changes (persisted before returning) ------------------------------------------

    async def get_topology_hints(self, req: Request) -> HintsResult:
        return await self._call("hints", self.policy.get_topology_hints, req)

    async def allocate(self, req: Request) -> AllocateResult:
        return await self._call("allocate", self.policy.allocate, req)

    async def release_pod(self, pod_uid: str) -> bool:
        """RemovePod, with the checkpoint written before it returns (admission's release, gRPC)."""
        return await self._call("remove_pod", self.policy.remove_pod, pod_uid)

    async def resize_shared(self, size: int | None, cpus: CPUSet | None = None) -> bool:
        """The advisor's size (and placement) of the shared pool (``DynamicPolicy.resize_shared``),
        journaled before it returns like every change; True when the pools changed."""
        return await self._call("resize_shared", self.policy.resize_shared, size, cpus)

    async def static_pools(self) -> bool:
        """The request-sized pools again (``DynamicPolicy.static_pools``: a start with the advisor
        off), journaled before it returns; True when the pools changed."""
        return await self._call("static_pools", self.policy.static_pools)

    def shared_bounds(self) -> tuple[int, int]:
        return self.policy.shared_bounds()

    def shared_room(self) -> CPUSet:
        return self.policy.shared_room()

    async def resources_allocation(self) -> list[AllocationInfo]:
        # read-only for the caller: the ramp-up it may complete is journaled in the background
        return await self._call("get_resources_allocation", self.policy.resources_allocation, wait=False)

    async def bind_cgroup(self, pod_uid: str, container: str, cgroup_path: str | None) -> bool:
        """Which cgroup a container runs in (launchers say so, before the process
        joins it). The path is checked before anything changes (CgroupPathError, a
        ValueError): only cgroups below the workload roots are enforced and killed.

        A container the policy holds nothing of in a pod it holds (an init container)
        follows the shared pool. True once the enforcer has written the cgroup's
        cpuset files (it is their one writer from then on); False when nothing
        enforces cgroups here, and the launcher writes ``placement`` itself."""
        if cgroup_path is not None:
            cgroup_path = validate_rel_path(cgroup_path, self.cgroup_roots)
        key = (pod_uid, container)
        st = self.policy.state
        held = st.get(pod_uid, container)
        follower = held is None and pod_uid in st.entries
        before = self.followers.get(key) if follower else held.cgroup_path if held is not None else None
        await self._bind(key, follower, cgroup_path)
        if cgroup_path is None or self.write_bound is None:
            return False
        try:
            return await self.write_bound(cgroup_path)
        except Exception:
            await self._bind(key, follower, before)  # a refused bind changes nothing
            raise

    async def _bind(self, key: tuple[str, str], follower: bool, path: str | None) -> None:
        if not follower:
            await self._call("bind_cgroup", self.policy.set_cgroup_path, *key, path)
        elif path is None:
            self.followers.pop(key, None)
        else:
            self.followers[key] = path

    def follower_targets(self, st: PolicyState) -> dict[str, CPUSet]:
        """Each bound init container's cgroup and the CPUs it follows in ``st`` (the
        shared pool); followers of pods ``st`` no longer holds are forgotten."""
        for key in [k for k in self.followers if k[0] not in st.entries]:
            del self.followers[key]
        if not self.followers:
            return {}
        shared = self.policy.shared_cpus(st)
        return {path: shared for path in self.followers.values()}

    def plan(self) -> PolicyPlan:
        """A private copy of the state to decide one pod on (admission, dry run)."""
        return PolicyPlan(self.policy)

    # -- reads (answered from memory, never waiting for a write) -----------------------

    def allocations(self) -> list[AllocationInfo]:
        return self.policy.state.containers()

    def moved_since(self, mark: object | None) -> tuple[object, set[tuple[str, str]] | None]:
        """(a new mark, the (pod uid, container) whose placement may have changed since ``mark``):
        a front that tells running containers where they are (NRI's UpdateContainers) reads
        back only those, not every container (``agent.cpu.state.moved_keys``). The mark is
        the state as it is now; None for the keys: compare all (no mark yet, or it cannot tell)."""
        st = self.policy.state
        if not isinstance(mark, PolicyState):
            return st, None
        return st, moved_keys(mark, st)

    def allocatable_cpus(self) -> CPUSet:
        return CPUSet(self.policy.idx.all) - self.policy.reserved

    def placement(self, pod_uid: str, container: str) -> Placement | None:
        p = self.policy.placement(pod_uid, container)
        if p is None and (pod_uid, container) in self.followers and pod_uid in self.policy.state.entries:
            return Placement(self.policy.shared_cpus())  # a bound init container: the shared pool, now
        return p

    def pools(self) -> dict[str, CPUSet]:
        return dict(self.policy.state.pools)

    def shared_cpus(self) -> CPUSet:
        return self.policy.shared_cpus()

    def free_per_numa(self) -> dict[int, int]:
        return self.policy.free_per_numa()

    def numa_of(self) -> Mapping[int, int]:
        return self.policy.idx.numa_of
