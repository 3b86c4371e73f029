"""The workload registry: every admitted pod, its status, and the ActivePods answer.

It is memory plus a ``RegistryStore``: each change is written (in an executor,
one write at a time per pod, always the latest record) before the awaiting
caller returns, so an answer the API gave is on disk. Pods being admitted are
*reserved* here first (their key and UID), so a concurrent admission of the
same name is refused, and the device manager's and CPU policy's clean-ups
(which release whatever ``active_pod_uids`` does not list) never take
resources from a pod in the middle of its admission.

All methods run on the daemon's loop; nothing here is thread-safe by design.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agent.contracts.pods import AdmittedPod, PodStatus
from agent.workloads.store import PodRecord, RegistryStore

__all__ = ["Registry", "RegistryEvent", "ADDED", "MODIFIED", "DELETED", "MAX_EVENTS", "ADMITTED"]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
#: events kept per pod for ``describe``
MAX_EVENTS = 20
#: the reason of a pod's status from its admission until a runtime reports on it
ADMITTED = "Admitted"


def _order_key(r: PodRecord) -> tuple[str, str]:
    return (r.pod.spec.namespace, r.pod.spec.name)


@dataclass(frozen=True)
class RegistryEvent:
    type: str
    record: PodRecord
    at: float


class Registry:
    def __init__(self, store: RegistryStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._records: dict[str, PodRecord] = {}
        self._by_key: dict[str, str] = {}
        self._reserved_keys: dict[str, str] = {}
        self._reserved_uids: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self.listeners: list[Callable[[RegistryEvent], None]] = []
        #: uid -> QoS of every record not terminated, and how many per QoS: kept per
        #: change, so no answer walks every record (issue 24)
        self._live: dict[str, str] = {}
        self._qos_counts: dict[str, int] = {}
        #: active_pod_uids() as last answered; None after a change (the device manager
        #: asks on every hint and allocation)
        self._active: frozenset[str] | None = None
        #: every record's (namespace, name), sorted: a List page is a bisect and a slice
        #: of it, not a sort of every record (issue 24)
        self._order: list[tuple[str, str]] = []
        #: every record's owner (the user it runs as), and how many records per owner: the
        #: per-user pod cap asks at each admission (``pods_of``), so kept per change too
        self._owner: dict[str, int] = {}
        self._owner_counts: dict[int, int] = {}

    # --- start ----------------------------------------------------------------------

    def restore(self, records: list[PodRecord]) -> None:
        for r in records:
            self._set(r.uid, r)
            self._by_key[r.key] = r.uid

    def _set(self, uid: str, rec: PodRecord | None) -> None:
        """Put (or, with None, drop) a record, keeping the live set, counts and order."""
        self._count_owner(uid, rec)
        old = self._records.pop(uid, None) if rec is None else self._records.get(uid)
        if rec is not None:
            self._records[uid] = rec
        if old is not None and (rec is None or _order_key(old) != _order_key(rec)):
            i = bisect.bisect_left(self._order, _order_key(old))
            if i < len(self._order) and self._order[i] == _order_key(old):
                del self._order[i]
            old = None
        if rec is not None and old is None:
            bisect.insort(self._order, _order_key(rec))
        was = self._live.pop(uid, None)
        if was is not None:
            n = self._qos_counts[was] - 1
            if n:
                self._qos_counts[was] = n
            else:
                del self._qos_counts[was]
        if rec is not None and not rec.status.phase.terminal:
            q = rec.pod.qos
            self._live[uid] = q
            self._qos_counts[q] = self._qos_counts.get(q, 0) + 1
        self._active = None

    def _count_owner(self, uid: str, rec: PodRecord | None) -> None:
        was = self._owner.pop(uid, None)
        if was is not None:
            n = self._owner_counts[was] - 1
            if n:
                self._owner_counts[was] = n
            else:
                del self._owner_counts[was]
        if rec is not None:
            owner = rec.pod.spec.owner_uid
            self._owner[uid] = owner
            self._owner_counts[owner] = self._owner_counts.get(owner, 0) + 1

    # --- reading (the WorkloadRegistry / ActivePods side) -----------------------------

    def pods_of(self, owner: int) -> int:
        """How many records (pods in any state, until removed) belong to user ``owner``."""
        return self._owner_counts.get(owner, 0)

    def uids_of(self, owner: int) -> list[str]:
        """The UIDs of user ``owner``'s records (a pass over every record: only for the
        per-user log cap, whose own cost is a walk of those pods' directories)."""
        return [uid for uid, o in self._owner.items() if o == owner]

    def active_pod_uids(self) -> frozenset[str]:
        """Pods not terminated, and those being admitted. The answer is a frozen copy
        (the contract's), made from the live set kept per change when first asked
        after one: a copy in C, not a pass over every record in Python."""
        if self._active is None:
            self._active = frozenset(self._live).union(self._reserved_uids)
        return self._active

    def live_qos_counts(self) -> dict[str, int]:
        """How many pods not terminated there are per QoS (the admitted-pods gauge)."""
        return dict(self._qos_counts)

    def get(self, uid: str) -> AdmittedPod | None:
        r = self._records.get(uid)
        return None if r is None else r.pod

    def record(self, uid: str) -> PodRecord | None:
        return self._records.get(uid)

    def by_key(self, key: str) -> PodRecord | None:
        uid = self._by_key.get(key)
        return None if uid is None else self._records.get(uid)

    def admitted(self) -> list[AdmittedPod]:
        return [r.pod for r in self._records.values() if not r.status.phase.terminal]

    def status(self, uid: str) -> PodStatus | None:
        r = self._records.get(uid)
        return None if r is None else r.status

    def records(self) -> list[PodRecord]:
        return list(self._records.values())

    def keys_after(self, after: tuple[str, str] | None) -> Iterator[tuple[str, str]]:
        """Every record's (namespace, name) after ``after`` (from the first with None), in
        order: O(log n) to begin, then one step per key taken, so a page costs its own size.
        Walk it without awaiting in between (the loop owns the registry; a change would move
        the positions). Across pages the caller resumes after the last key it returned, so a
        pod present for the whole listing is listed exactly once."""
        order = self._order
        start = 0 if after is None else bisect.bisect_right(order, after)
        for i in range(start, len(order)):
            yield order[i]

    def by_name(self, namespace: str, name: str) -> PodRecord | None:
        return self.by_key(f"{namespace}/{name}")

    def __iter__(self) -> Iterator[PodRecord]:
        return iter(list(self._records.values()))

    def __len__(self) -> int:
        return len(self._records)

    # --- reservations (admission in flight) ------------------------------------------

    def taken(self, key: str, uid: str) -> str | None:
        """Why a new pod with this key/UID cannot be admitted now, or None."""
        if key in self._by_key or key in self._reserved_keys:
            return f"a pod named {key} already exists"
        if uid in self._records or uid in self._reserved_uids:
            return f"a pod with uid {uid} already exists"
        return None

    def reserve(self, key: str, uid: str) -> None:
        why = self.taken(key, uid)
        if why is not None:
            raise KeyError(why)
        self._reserved_keys[key] = uid
        self._reserved_uids.add(uid)
        self._active = None

    def unreserve(self, key: str, uid: str) -> None:
        if self._reserved_keys.get(key) == uid:
            del self._reserved_keys[key]
        self._reserved_uids.discard(uid)
        self._active = None

    # --- changes (persisted before they return) ----------------------------------------

    def _event(self, r: PodRecord, *lines: str, first_at: float | None = None) -> PodRecord:
        """``lines`` as events at the clock's now; ``first_at``: the first one's time instead (kept
        between the last event already recorded and now, so the events stay in order)."""
        now = self.clock()
        times = [now] * len(lines)
        if first_at is not None and lines:
            times[0] = min(now, max(first_at, r.events[-1][0] if r.events else first_at))
        events = (r.events + tuple(zip(times, lines, strict=True)))[-MAX_EVENTS:]
        return dataclasses.replace(r, events=events)

    def _emit(self, kind: str, r: PodRecord) -> None:
        ev = RegistryEvent(kind, r, self.clock())
        for cb in list(self.listeners):
            cb(ev)

    async def _write(self, uid: str) -> None:
        """Write the *current* record of ``uid`` (or its deletion)."""
        lock = self._locks.setdefault(uid, asyncio.Lock())
        loop = asyncio.get_running_loop()
        async with lock:
            rec = self._records.get(uid)
            if rec is None:
                await loop.run_in_executor(None, self.store.delete, uid)
            else:
                await loop.run_in_executor(None, self.store.put, rec)
        if uid not in self._records and not lock.locked():
            self._locks.pop(uid, None)

    async def add(self, pod: AdmittedPod, line: str = "admitted") -> PodRecord:
        """Record an admission. On a write failure nothing is recorded and the error propagates."""
        key, uid = pod.spec.key, pod.uid
        rec = self._event(PodRecord(pod, PodStatus(reason=ADMITTED)), line)
        self._set(uid, rec)
        self._by_key[key] = uid
        try:
            await self._write(uid)
        except BaseException:
            self._set(uid, None)
            if self._by_key.get(key) == uid:
                del self._by_key[key]
            # the rename may have happened before a later step failed (the directory fsync):
            # a record the caller is told does not exist must not come back at the next start
            try:
                await asyncio.get_running_loop().run_in_executor(None, self.store.delete, uid)
            except Exception:  # noqa: BLE001 - best effort; the disk is failing already
                pass
            raise
        self._emit(ADDED, rec)
        return rec

    async def update(
        self, uid: str, *, status: PodStatus | None = None, released: bool | None = None,
        removing: bool | None = None, line: str | None = None, lines: tuple[str, ...] = (),
    ) -> PodRecord | None:
        """Change a record (None when the pod is unknown). Memory is authoritative:
        a failed write is raised but the change stays, and the next write carries it.
        ``lines``: several events for one write (a pod's end and its release); the write of the end
        dates its first line by ``status.finished_at``."""
        rec = self._records.get(uid)
        if rec is None:
            return None
        changes: dict[str, object] = {}
        if status is not None:
            changes["status"] = status
        if released is not None:
            changes["released"] = released
        if removing is not None:
            changes["removing"] = removing
        new = dataclasses.replace(rec, **changes)  # type: ignore[arg-type]
        lines = (line, *lines) if line else lines
        if lines:
            # the write that records the pod's end: its first line is the end (admission's order), dated
            # by the status' end (the shim's exit record), not by the restart that noticed it
            ends = status is not None and status.phase.terminal and not rec.status.phase.terminal
            new = self._event(new, *lines, first_at=status.finished_at if ends and status is not None else None)
        self._set(uid, new)
        await self._write(uid)
        self._emit(MODIFIED, new)
        return new

    async def delete(self, uid: str) -> PodRecord | None:
        rec = self._records.get(uid)
        if rec is None:
            return None
        self._set(uid, None)
        if self._by_key.get(rec.key) == uid:
            del self._by_key[rec.key]
        try:
            await self._write(uid)
        except BaseException:
            self._set(uid, rec)
            self._by_key[rec.key] = uid
            raise
        self._emit(DELETED, rec)
        return rec
