"""The device manager: single owner of registered plugins, device health and
allocations, driven from one asyncio loop.

Concurrency model: every state change happens synchronously on the loop
between awaits, so no two changes interleave. An allocation may await plugin
RPCs (GetPreferredAllocation, Allocate); device *choice* for a resource runs
under that resource's asyncio.Lock, and chosen devices are reserved before the
lock is released, so concurrent allocations can never pick the same device.
The Allocate RPC runs outside the lock; a failure rolls the reservation back.

Durability: every change of state (an allocation committed, a pod released, a
resource registered or deleted) appends one record to the host's journal
(``agent.journal``) in the loop step that made it. ``allocate`` answers only
after the fdatasync holding its record; when the record cannot be made durable
the allocation is undone and the call fails with ``UNAVAILABLE`` (memory and
disk as before). Releases, registrations and deletions are not awaited by
anyone: if their record fails they stay in memory and the journal rewrites its
snapshot before the next record (a crash in between brings a released pod
back, and the active-pods source releases it again). Device health and NUMA
placement are not state: a change of them writes a snapshot in the background
(for ``hwagent resources``), never delaying a call. Reads (hints, pod-resources,
capacity) never wait for a write.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from agent.devicemanager import metrics as m
from agent.devicemanager.checkpoint import open_journal, record_allocate, record_delete, record_register, record_release
from agent.contracts.devices import CheckpointData, EndpointRecord
from agent.devicemanager.endpoint import Endpoint, EndpointStopped
from agent.devicemanager.hints import resource_hints
from agent.contracts.hints import TopologyHint
from agent.contracts.devices import (
    CONTAINER_TYPES,
    Allocation,
    ContainerAllocation,
    ContainerRequest,
    Device,
    ResourceDevices,
    RunOptions,
    merge_run_options,
)
from agent.devicemanager.plan import DevicePlan, choose, existing_allocation, planned
from agent.devicemanager.pod_devices import PodDevices
from agent.devicemanager.selection import AllocationError, PreferredFn
from agent.devicemanager.types import PluginEndpoint
from agent.eventlog import get_logger
from agent.journal import JournalError
from agent.limits import LimitError, check_name, check_qualified_name
from agent.pods import ActivePods
from agent.tasks import cancel_and_wait

log = get_logger("hwagent.devicemanager")


def check_request_names(req: ContainerRequest) -> None:
    """agent.limits' bounds on every name a request would store; raises LimitError."""
    check_name("pod_uid", req.pod_uid)
    check_name("container_name", req.container_name)
    check_name("pod_name", req.pod_name)
    check_name("pod_namespace", req.pod_namespace)
    for resource in req.resources:
        check_name("resource_name", resource)
        check_qualified_name("resource_name", resource)


def check_request(req: ContainerRequest) -> None:
    """A request the manager can act on, or AllocationError(INVALID_ARGUMENT)
    before anything is looked at or changed."""
    if req.container_type not in CONTAINER_TYPES:
        raise AllocationError(f"unknown container type {req.container_type!r}", "INVALID_ARGUMENT")
    if not req.pod_uid or not req.container_name:
        raise AllocationError("pod uid and container name are required", "INVALID_ARGUMENT")
    try:
        check_request_names(req)
    except LimitError as e:
        raise AllocationError(str(e), "INVALID_ARGUMENT") from None
    for resource, count in req.resources.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise AllocationError(f"bad device count {count!r} for {resource}", "INVALID_ARGUMENT")


@dataclass
class _Stopped:
    """A resource with no live endpoint: its last socket and when it stopped."""

    socket: str
    stop_time: float  # time.time()
    since_mono: float = field(default_factory=time.monotonic)


class DeviceManager:
    """The device-plugin host: endpoints, device health and the
    allocation table (``PodDevices``), each changed only on the owning loop."""

    def __init__(
        self,
        *,
        numa_ids: Iterable[int],
        checkpoint_path: Path | None,
        active_pods: ActivePods | None = None,
        stop_grace_seconds: float = 300.0,
        prestart_timeout_seconds: float = 30.0,
        dial_timeout_seconds: float = 10.0,
        allocate_timeout_seconds: float = 60.0,
    ) -> None:
        self.numa_ids = tuple(sorted(numa_ids))
        self.active_pods = active_pods
        self.stop_grace = stop_grace_seconds
        self.prestart_timeout = prestart_timeout_seconds
        self.dial_timeout = dial_timeout_seconds
        self.call_timeout = allocate_timeout_seconds
        self._devices: dict[str, ResourceDevices] = {}
        self._endpoints: dict[str, dict[str, PluginEndpoint]] = {}
        self._stopped: dict[str, _Stopped] = {}
        self._deleted: set[str] = set()
        self._table = PodDevices()
        self._locks: dict[str, asyncio.Lock] = {}
        self._pending: set[asyncio.Task] = set()
        self._journal = open_journal(checkpoint_path) if checkpoint_path else None
        self._checkpoint_path = checkpoint_path
        #: resource -> socket as last journaled (a Register record only when it changes)
        self._journaled_sockets: dict[str, str] = {}
        self._expiry_task: asyncio.Task | None = None
        self._stopping = False

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self._journal is not None:
            loop = asyncio.get_running_loop()
            rec = await loop.run_in_executor(None, self._journal.recover, True)
            if rec.problems:
                m.CHECKPOINT_ERRORS.labels(kind="corrupt").inc()
                log.error(
                    "checkpoint corrupt", path=self._checkpoint_path, kept_aside=[str(p) for p in rec.kept_aside],
                    reason="; ".join(rec.problems),
                    action="start_empty" if rec.snapshot_discarded else "replay_stopped_before_it",
                )
            data = rec.state.data()
            if data.allocations or data.registered or data.deleted:
                # the replay's table is already built and checked: adopt it instead of inserting every
                # allocation again into a second one (issue 24: restart in O(state), one copy in memory)
                self.restore(data, table=rec.state.devs)
            self._journaled_sockets = {e.resource: e.socket for e in data.endpoints}
            await loop.run_in_executor(None, self._journal.resume, self.snapshot)
        self._expiry_task = asyncio.get_running_loop().create_task(self._expiry_loop(), name="devicemanager-expiry")

    async def stop(self) -> None:
        """Close every endpoint and write a last checkpoint; safe to call twice."""
        if self._stopping:
            return
        self._stopping = True
        await cancel_and_wait(self._expiry_task)
        for eps in list(self._endpoints.values()):
            for ep in list(eps.values()):
                await ep.close()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        if self._journal is not None:
            with contextlib.suppress(Exception):
                await self._journal.compact_now()  # the last device/endpoint view for `hwagent resources`
            await self._journal.close()

    def restore(self, data: CheckpointData, table: PodDevices | None = None) -> None:
        """Take allocations and known resources from a checkpoint.

        Restored resources wait as stopped endpoints with no devices (capacity
        0) until their plugin registers again, and are deleted after the stop
        grace period otherwise, as in the kubelet. ``table``: ``data``'s
        allocations already in a table of their own (the journal's replay),
        taken as it is when this host holds none yet.
        """
        now = time.time()
        sockets = {e.resource: e.socket for e in data.endpoints}
        if table is not None and not len(self._table):
            self._table = table
        else:
            for a in data.allocations:
                self._table.insert(a)
        for resource in set(data.registered) | {a.resource for a in data.allocations}:
            if resource in data.deleted and resource not in data.registered:
                continue
            self._devices.setdefault(resource, ResourceDevices())
            self._stopped.setdefault(resource, _Stopped(sockets.get(resource, ""), now))
            self._refresh_metrics(resource)
        log.info("checkpoint restored", allocations=len(data.allocations), resources=len(self._stopped))

    # ------------------------------------------------------------ registration

    async def register(self, resource: str, socket: str) -> Endpoint:
        """Connect to a plugin (GetDevicePluginOptions) and start consuming ListAndWatch.

        A (resource, socket) already connected is replaced once the new
        connection answers, as the kubelet does; until then, and if the new one
        fails, the old endpoint keeps serving.
        """
        ep = Endpoint(resource, socket, dial_timeout=self.dial_timeout, call_timeout=self.call_timeout)
        try:
            await ep.connect()
        except asyncio.TimeoutError:
            raise AllocationError(f"failed to dial device plugin {socket}: timed out", "UNAVAILABLE") from None
        except grpc.aio.AioRpcError as e:
            raise AllocationError(
                f"failed to get device plugin options: {e.code().name}: {e.details()}", "UNAVAILABLE"
            ) from None
        old = self.attach(ep)
        if old is not None:
            await old.close()  # no on_closed: the resource keeps its devices and health
            log.info("plugin replaced", resource=resource, socket=socket)
        return ep

    def attach(self, ep: PluginEndpoint) -> PluginEndpoint | None:
        """Adopt a connected endpoint and start consuming its device stream.

        register() uses it after dialling; a benchmark can pass an in-process
        endpoint (same interface, no socket) to measure the host alone. Returns
        the endpoint it replaced on the same (resource, socket), for the caller
        to close; its late messages and its end are ignored from now on.
        """
        resource, socket = ep.resource, ep.socket
        eps = self._endpoints.setdefault(resource, {})
        old = eps.pop(socket, None)
        eps[socket] = ep  # insertion order: the last connected is the primary
        self._stopped.pop(resource, None)
        self._deleted.discard(resource)
        self._devices.setdefault(resource, ResourceDevices())
        ep.run(self._on_snapshot, self._on_closed)
        if self._journaled_sockets.get(resource) != socket:
            self._journaled_sockets[resource] = socket
            self._append_background(record_register(resource, socket))
        log.info(
            "plugin connected", resource=resource, socket=socket, pre_start_required=ep.options.pre_start_required,
            preferred_allocation=ep.options.get_preferred_allocation_available,
        )
        self._refresh_metrics(resource)
        self._schedule_checkpoint()
        return old

    async def deregister(self, resource: str, socket: str) -> None:
        """Drop one endpoint (plugin-watcher socket removed); unknown pairs are a no-op."""
        ep = self._endpoints.get(resource, {}).get(socket)
        if ep is None:
            return
        await ep.close()
        self._disconnected(ep, "deregistered")

    def _on_snapshot(self, ep: PluginEndpoint, devices: list[Device]) -> None:
        if self._endpoints.get(ep.resource, {}).get(ep.socket) is not ep:
            return  # a late message from a replaced endpoint
        self._devices[ep.resource] = ResourceDevices.from_snapshot(devices)
        res = self._devices[ep.resource]
        log.info(
            "devices updated", resource=ep.resource, socket=ep.socket, capacity=res.capacity,
            allocatable=res.allocatable,
        )
        self._refresh_metrics(ep.resource)
        self._schedule_checkpoint()

    def _on_closed(self, ep: PluginEndpoint, reason: str) -> None:
        self._disconnected(ep, reason)

    def _disconnected(self, ep: PluginEndpoint, reason: str) -> None:
        eps = self._endpoints.get(ep.resource, {})
        if eps.get(ep.socket) is not ep:
            return  # not (or no longer) the registered endpoint for that socket
        del eps[ep.socket]
        if eps:
            log.warning(
                "plugin disconnected", resource=ep.resource, socket=ep.socket, reason=reason, survivors=len(eps),
            )
        else:
            del self._endpoints[ep.resource]
            self._devices[ep.resource] = self._devices.get(ep.resource, ResourceDevices()).all_unhealthy()
            self._stopped[ep.resource] = _Stopped(ep.socket, ep.stop_time or time.time())
            log.warning(
                "plugin disconnected", resource=ep.resource, socket=ep.socket, reason=reason, devices="unhealthy",
                grace_seconds=f"{self.stop_grace:g}",
            )
        self._refresh_metrics(ep.resource)
        self._schedule_checkpoint()

    # ------------------------------------------------------------------ status

    def capacity(self) -> tuple[dict[str, int], dict[str, int], list[str]]:
        """(capacity, allocatable, resources deleted by this call), expiring stopped
        resources whose grace period has passed."""
        deleted = self._expire()
        cap = {r: d.capacity for r, d in self._devices.items()}
        alloc = {r: d.allocatable for r, d in self._devices.items()}
        return cap, alloc, deleted

    def deleted_resources(self) -> frozenset[str]:
        """Resources deleted after their grace period and not registered since."""
        return frozenset(self._deleted)

    def resources(self) -> dict[str, ResourceDevices]:
        return dict(self._devices)

    def endpoints(self) -> list[EndpointRecord]:
        out = [
            EndpointRecord(r, s, "connected") for r, eps in self._endpoints.items() for s in eps
        ]
        out += [EndpointRecord(r, st.socket, "stopped", st.stop_time) for r, st in self._stopped.items()]
        return sorted(out, key=lambda e: (e.resource, e.socket))

    def allocatable_devices(self) -> dict[str, list[Device]]:
        return {r: sorted((d for d in res.devices.values() if d.healthy), key=lambda d: d.id)
                for r, res in self._devices.items()}

    def allocations(self) -> list[Allocation]:
        """Committed allocations (the ``devicemanager`` service contract)."""
        return self._table.committed()

    def container_allocations(self, pod_uid: str) -> dict[str, list[Allocation]]:
        return self._table.container_allocations(pod_uid)

    def run_options(self, pod_uid: str, container_name: str) -> RunOptions | None:
        allocs = self.container_allocations(pod_uid).get(container_name)
        if not allocs:
            return None
        return merge_run_options((a.resource, a.response_pb()) for a in allocs)

    def snapshot(self) -> CheckpointData:
        return CheckpointData(
            allocations=self._table.to_checkpoint(),
            registered={r: tuple(d.healthy) for r, d in self._devices.items()},
            devices={r: tuple(d.devices.values()) for r, d in self._devices.items()},
            endpoints=tuple(self.endpoints()),
            deleted=tuple(self._deleted),
        )

    async def journal_drain(self) -> None:
        """Every change so far durable or undone (no snapshot)."""
        if self._journal is not None:
            await self._journal.drain()

    async def flush_checkpoint(self) -> None:
        """Every change so far durable (or undone), and a snapshot written."""
        if self._journal is not None:
            await self._journal.compact_now()

    # --------------------------------------------------------------- allocation

    def _primary(self, resource: str) -> PluginEndpoint:
        eps = self._endpoints.get(resource)
        if eps:
            return next(reversed(eps.values()))
        stopped = self._stopped.get(resource)
        if stopped is not None:
            raise EndpointStopped(stopped.socket or resource)
        raise AllocationError(f"unknown Device Plugin {resource}", "NOT_FOUND")

    def release_pod(self, pod_uid: str) -> None:
        """Forget every allocation of a pod (the ``devicemanager`` service contract)."""
        keys = self._table.remove_pod(pod_uid)
        if keys:
            log.info("pod released", pod=pod_uid, allocations=len(keys))
            for r in {k[2] for k in keys}:
                self._refresh_metrics(r)
            self._append_background(record_release(pod_uid))

    def gc_inactive(self, exempt: str | None = None) -> list[str]:
        """Release pods the active-pods source no longer lists (kubelet UpdateAllocatedDevices)."""
        gone = self._inactive(exempt)
        for uid in gone:
            self.release_pod(uid)
        return gone

    def _inactive(self, exempt: str | None) -> list[str]:
        """Pods holding devices that the active-pods source no longer lists."""
        if self.active_pods is None:
            return []
        active = self.active_pods.active_pod_uids()
        if active is None:  # no source registered (yet): nothing is known to be gone
            return []
        return [
            uid for uid in self._table.pods()
            if uid not in active and uid != exempt and self._table.pod_committed(uid)
        ]

    def plan(self, pod_uid: str) -> DevicePlan:
        """A copy of the allocation table (as ``allocate`` for ``pod_uid`` would
        find it: inactive pods already gone) to decide a pod on, changing nothing."""
        table = PodDevices()
        gone = set(self._inactive(pod_uid))
        for a in self._table:
            if a.pod_uid not in gone:
                table.insert(a)
        return DevicePlan(self.numa_ids, self._devices, table, self._preferred_fn)

    def _preferred_fn(self, resource: str) -> PreferredFn | None:
        """The plugin's GetPreferredAllocation, when it offers one; raises as
        ``allocate`` would when no plugin serves the resource."""
        ep = self._primary(resource)
        return ep.get_preferred_allocation if ep.options.get_preferred_allocation_available else None

    def _lock(self, resource: str) -> asyncio.Lock:
        lock = self._locks.get(resource)
        if lock is None:
            lock = self._locks[resource] = asyncio.Lock()
        return lock

    async def allocate(self, req: ContainerRequest) -> ContainerAllocation:
        """Give a container its devices: reuse, choose, call the plugins, commit.

        All-or-nothing per call: if any resource fails (choice or the plugin's
        Allocate), every reservation made by this call is rolled back; a
        commit whose journal record cannot be made durable is undone
        (``UNAVAILABLE``), so an error leaves memory and disk as they were.
        """
        check_request(req)
        self.gc_inactive(exempt=req.pod_uid)
        wanted = sorted(r for r, n in req.resources.items() if n > 0)
        kept: list[Allocation] = []
        reserved: list[Allocation] = []
        try:
            await self._reserve(req, wanted, kept, reserved)
            done = await self._call_plugins(reserved)
        except BaseException as e:
            self._undo(reserved)
            for resource in wanted:
                m.ALLOCATIONS.labels(resource=resource, outcome="error").inc()
            if isinstance(e, AllocationError):
                log.warning("allocation failed", pod=req.pod_uid, container=req.container_name, error=str(e))
            raise
        self._commit(req, reserved, done)
        await self._persist(req, done, kept)
        for a in done:
            m.ALLOCATIONS.labels(resource=a.resource, outcome="ok").inc()
        for a in kept:
            m.ALLOCATIONS.labels(resource=a.resource, outcome="reused").inc()
        if reserved:
            log.info(
                "allocated", pod=req.pod_uid, container=req.container_name,
                devices=";".join(f"{a.resource}={','.join(a.device_ids)}" for a in done),
            )
        return ContainerAllocation(req.pod_uid, req.container_name, tuple(kept) + tuple(done))

    async def _reserve(
        self, req: ContainerRequest, wanted: list[str], kept: list[Allocation], reserved: list[Allocation]
    ) -> None:
        """Per resource, under its lock: the container's committed allocation
        (appended to ``kept``) or freshly chosen devices, recorded at once so no
        concurrent call picks them (appended to ``reserved`` as they are made,
        for the caller to roll back if a later resource fails)."""
        for resource in wanted:
            async with self._lock(resource):
                existing = self._table.get((req.pod_uid, req.container_name, resource))
                if existing is not None:
                    kept.append(existing_allocation(req, resource, existing, self._devices.get(resource)))
                    continue
                a = await self._choose(req, resource)
                self._table.insert(a)
                reserved.append(a)

    async def _call_plugins(self, reserved: list[Allocation]) -> list[Allocation]:
        """Each reservation with its plugin's Allocate response (the commit to be)."""
        done: list[Allocation] = []
        for a in reserved:
            ep = self._primary(a.resource)
            t0 = time.perf_counter()
            try:
                resp = await ep.allocate(a.device_ids)
            finally:
                m.ALLOC_DURATION.labels(resource=a.resource).observe(time.perf_counter() - t0)
            done.append(dataclasses.replace(a, response=resp.SerializeToString()))
        return done

    def _commit(self, req: ContainerRequest, reserved: list[Allocation], done: list[Allocation]) -> None:
        """Replace the reservations by their committed allocations, unless the
        pod was released meanwhile (then all of them go back: ABORTED)."""
        if not all(self._table.holds(a) for a in reserved):
            self._undo(reserved)
            raise AllocationError(f"pod {req.pod_uid} was released during its allocation", "ABORTED")
        for committed in done:
            self._table.commit(committed)
            self._refresh_metrics(committed.resource)

    async def _persist(self, req: ContainerRequest, done: list[Allocation], kept: list[Allocation]) -> None:
        """Answer only once the commit is durable. A record that cannot be
        made durable undoes the commit (the journal calls ``_undo``) and fails
        UNAVAILABLE; a repeated Allocate waits for the record of the commit it
        answers from, which may still be syncing."""
        if self._journal is None:
            return
        if done:
            try:
                await self._journal.append(record_allocate(done), undo=lambda: self._undo(done))
            except JournalError as e:
                m.CHECKPOINT_ERRORS.labels(kind="write").inc()
                for a in done:
                    m.ALLOCATIONS.labels(resource=a.resource, outcome="error").inc()
                log.error("allocation not persisted", pod=req.pod_uid, container=req.container_name, error=str(e))
                raise AllocationError(
                    f"device allocation could not be persisted, nothing was allocated: {e}", "UNAVAILABLE"
                ) from None
        elif kept:
            try:
                await self._journal.barrier()
            except JournalError as e:
                raise AllocationError(f"device allocation could not be persisted: {e}", "UNAVAILABLE") from None

    def _undo(self, allocs: list[Allocation]) -> None:
        """Take back these allocations (each only if it is still the one recorded)."""
        for a in allocs:
            if self._table.holds(a):
                self._table.remove(a.key)
            self._refresh_metrics(a.resource)

    async def _choose(self, req: ContainerRequest, resource: str) -> Allocation:
        """Fresh devices for the container (not yet recorded): ``plan.choose``
        on the live table, the same choice a decision made on its copy."""
        reusable = self._table.reusable(req.pod_uid, resource)
        picked = await choose(req, resource, self._devices.get(resource), self._table, self._preferred_fn)
        now = self._still_free(resource, picked, reusable)
        return planned(req, resource, picked, now)

    def _still_free(self, resource: str, picked: Collection[str], reusable: set[str]) -> ResourceDevices:
        """The plugin RPC may have let a health update or another reservation
        in: the picked devices must still be healthy and free (or reusable)."""
        now = self._devices.get(resource)
        stale = [
            d for d in picked
            if now is None or d not in now.healthy or (self._table.in_use(resource, d) and d not in reusable)
        ]
        if now is None or stale:
            raise AllocationError(
                f"devices of {resource} changed during allocation ({', '.join(stale)}); retry", "ABORTED"
            )
        return now

    async def pre_start(self, pod_uid: str, container_name: str) -> None:
        """PreStartContainer for each of the container's resources whose plugin asked for it."""
        for a in self.container_allocations(pod_uid).get(container_name, []):
            if not a.device_ids:
                continue
            ep = self._primary(a.resource)
            if ep.options.pre_start_required:
                await ep.pre_start_container(a.device_ids, self.prestart_timeout)

    # ---------------------------------------------------------------- hints

    def topology_hints(
        self, pod_uid: str, container_name: str, requests: Mapping[str, int]
    ) -> dict[str, list[TopologyHint] | None]:
        """Container scope (``hints.resource_hints``); pods gone are released first."""
        self.gc_inactive(exempt=pod_uid)
        return resource_hints(self.numa_ids, self._devices, self._table, pod_uid, container_name, requests)

    def pod_topology_hints(
        self, pod_uid: str, requests: Mapping[str, int]
    ) -> dict[str, list[TopologyHint] | None]:
        """Pod scope: the pod-level request against what the whole pod holds."""
        self.gc_inactive(exempt=pod_uid)
        return resource_hints(self.numa_ids, self._devices, self._table, pod_uid, None, requests)

    # ---------------------------------------------------------------- internals

    def _expire(self) -> list[str]:
        now = time.monotonic()
        gone = [
            r for r, st in self._stopped.items()
            if r not in self._endpoints and now - st.since_mono > self.stop_grace
        ]
        for r in gone:
            del self._stopped[r]
            self._devices.pop(r, None)
            self._deleted.add(r)
            log.warning(
                "resource deleted", resource=r, reason="stop_grace_expired", grace_seconds=f"{self.stop_grace:g}",
            )
            _forget_metrics(r)
            self._journaled_sockets.pop(r, None)
            self._append_background(record_delete(r))
        return gone

    async def _expiry_loop(self) -> None:
        period = max(0.05, min(self.stop_grace / 4, 10.0))
        while True:
            await asyncio.sleep(period)
            self._expire()

    def _schedule_checkpoint(self) -> None:
        """Device health or endpoints changed: not state, but ``hwagent
        resources`` shows them; a snapshot in the background, coalesced."""
        if self._journal is not None:
            self._journal.request_snapshot()

    def _append_background(self, record: bytes) -> None:
        """A change no caller waits for; if it cannot be made durable it stays
        in memory and the journal rewrites its snapshot before the next record."""
        if self._journal is None:
            return
        journal = self._journal
        fut = journal.append(record, undo=journal.request_reset)
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())

    def _refresh_metrics(self, resource: str) -> None:
        res = self._devices.get(resource)
        if res is not None:
            m.CAPACITY.labels(resource=resource).set(res.capacity)
            m.ALLOCATABLE.labels(resource=resource).set(res.allocatable)
        m.ALLOCATED.labels(resource=resource).set(self._table.allocated_count(resource))
        m.ENDPOINTS.labels(resource=resource, state="connected").set(len(self._endpoints.get(resource, {})))
        m.ENDPOINTS.labels(resource=resource, state="stopped").set(1 if resource in self._stopped else 0)


def _forget_metrics(resource: str) -> None:
    """Drop a deleted resource's series (bounded label sets, no stale gauges)."""
    for metric, labels in (
        (m.CAPACITY, (resource,)), (m.ALLOCATABLE, (resource,)),
        (m.ENDPOINTS, (resource, "connected")), (m.ENDPOINTS, (resource, "stopped")),
    ):
        try:
            metric.remove(*labels)
        except KeyError:
            pass
