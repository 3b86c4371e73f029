"""Policy state: container allocations and pools, plus the per-NUMA machine
state derived from them.

Differences from upstream's encoding, on purpose: pools are a separate map
(upstream stores them as pseudo-pods with container key ""), and machine state
is never stored as truth — it is always regenerated from the entries
(upstream also regenerates it on restore, then rewrites it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agent.contracts.cpu import MAIN, SIDECAR, AllocationInfo
from agent.cpu.calculator import TopoIndex
from agent.cpu.qos import DEDICATED, RECLAIM_POOL, RECLAIMED, RESERVE_POOL, SHARED, SYSTEM
from agent.cpuset import CPUSet

__all__ = [
    "AllocationInfo",
    "Basis",
    "Change",
    "NUMAState",
    "PolicyState",
    "StateIndex",
    "machine_state",
    "repoint_followers",
    "validate_entry",
    "validate_state",
]

T = TypeVar("T")



Entries = dict[str, dict[str, AllocationInfo]]


Key = tuple[str, str]


@dataclass(frozen=True)
class Basis:
    """The cpusets the last pool adjustment gave its followers: every follower
    of an index that is not ``touched`` still holds exactly these."""

    pools: dict[str, CPUSet]
    ramp: CPUSet
    all_cpus: CPUSet


class StateIndex:
    """Who depends on what in a ``PolicyState``, kept so that a call costs
    O(what changed) instead of a pass over every container.

    Built once from the entries, then derived copy-on-write along with each
    new state (``with_entry``/``without_entry``/``without_pod``): the nested
    dicts are shared between states and never mutated after being shared.

    - ``follow[pool]``: shared/reclaimed main containers whose cpuset is their
      pool's (not ramping up); ``qty[pool]``: the shared ones' requests;
    - ``ramp``: shared/reclaimed main containers ramping up (they get every
      CPU the shared pools may use); ``system``: system_cores containers;
    - ``ded``: dedicated numa_binding main containers and their cpusets;
    - ``sidecar_pods``: pods holding a sidecar, and how many;
    - ``qos_counts``: containers per QoS level; ``n_shared``: shared mains;
    - ``basis`` / ``touched``: see ``Basis``; keys changed since it was set.
    """

    __slots__ = ("follow", "qty", "ramp", "system", "ded", "sidecar_pods", "qos_counts", "n_shared",
                 "basis", "touched", "_memo")  # fmt: skip

    def __init__(self) -> None:
        self.follow: dict[str, dict[Key, None]] = {}
        self.qty: dict[str, dict[Key, float]] = {}
        self.ramp: dict[Key, None] = {}
        self.system: dict[Key, None] = {}
        self.ded: dict[Key, CPUSet] = {}
        self.sidecar_pods: dict[str, int] = {}
        self.qos_counts: dict[str, int] = {}
        self.n_shared = 0
        self.basis: Basis | None = None
        self.touched: dict[Key, None] = {}
        #: values derived from ``ded`` alone, valid while ``ded`` is the same
        #: object (it is replaced, never mutated, once shared)
        self._memo: dict[Any, tuple[dict[Key, CPUSet], Any]] = {}

    def memo_by_ded(self, key: Any, compute: Callable[[], T]) -> T:
        hit = self._memo.get(key)
        if hit is not None and hit[0] is self.ded:
            return hit[1]
        value = compute()
        self._memo[key] = (self.ded, value)
        return value

    @classmethod
    def build(cls, entries: Entries) -> StateIndex:
        ix = cls()
        for pod in entries.values():
            for a in pod.values():
                ix._add(a, owned=True)
        return ix

    def copy(self) -> StateIndex:
        """Shallow: nested dicts stay shared until ``_add``/``_remove`` copy
        the ones they change (``owned=False``)."""
        new = object.__new__(StateIndex)
        for k in self.__slots__:
            setattr(new, k, getattr(self, k))
        new._memo = dict(self._memo)
        return new

    def _add(self, a: AllocationInfo, owned: bool = False) -> None:
        key = (a.pod_uid, a.container_name)
        self.qos_counts = _inc(self.qos_counts, a.qos_level, 1, owned)
        if a.is_sidecar:
            self.sidecar_pods = _inc(self.sidecar_pods, a.pod_uid, 1, owned)
            return
        q = a.qos_level
        if q == SHARED:
            self.n_shared += 1
        if q in (SHARED, RECLAIMED):
            if a.ramp_up:
                self.ramp = _put(self.ramp, key, None, owned)
            else:
                self.follow = _put_nested(self.follow, a.owner_pool_name, key, None, owned)
                if q == SHARED and a.owner_pool_name:
                    self.qty = _put_nested(self.qty, a.owner_pool_name, key, a.request_quantity, owned)
        elif q == SYSTEM:
            self.system = _put(self.system, key, None, owned)
        elif a.is_dedicated_binding:
            self.ded = _put(self.ded, key, a.cpuset, owned)

    def _remove(self, a: AllocationInfo) -> None:
        key = (a.pod_uid, a.container_name)
        self.qos_counts = _inc(self.qos_counts, a.qos_level, -1, False)
        if key in self.touched:
            self.touched = _drop(self.touched, key)
        if a.is_sidecar:
            self.sidecar_pods = _inc(self.sidecar_pods, a.pod_uid, -1, False)
            return
        q = a.qos_level
        if q == SHARED:
            self.n_shared -= 1
        if q in (SHARED, RECLAIMED):
            if a.ramp_up:
                self.ramp = _drop(self.ramp, key)
            else:
                self.follow = _drop_nested(self.follow, a.owner_pool_name, key)
                if q == SHARED and a.owner_pool_name:
                    self.qty = _drop_nested(self.qty, a.owner_pool_name, key)
        elif q == SYSTEM:
            self.system = _drop(self.system, key)
        elif a.is_dedicated_binding:
            self.ded = _drop(self.ded, key)

    def replaced(self, old: AllocationInfo | None, new: AllocationInfo | None) -> StateIndex:
        """The index of the state where ``old`` was replaced by ``new`` (either
        may be None)."""
        ix = self.copy()
        if old is not None:
            ix._remove(old)
        if new is not None:
            ix._add(new)
            ix.touched = _put(ix.touched, (new.pod_uid, new.container_name), None, False)
        return ix


def _inc(d: dict[str, int], k: str, by: int, owned: bool) -> dict[str, int]:
    if not owned:
        d = dict(d)
    n = d.get(k, 0) + by
    if n:
        d[k] = n
    else:
        d.pop(k, None)
    return d


def _put(d: dict, k: Any, v: Any, owned: bool) -> dict:
    if not owned:
        d = dict(d)
    d[k] = v
    return d


def _drop(d: dict, k: Any) -> dict:
    d = dict(d)
    d.pop(k, None)
    return d


def _put_nested(d: dict[str, dict], outer: str, k: Any, v: Any, owned: bool) -> dict[str, dict]:
    if not owned:
        d = dict(d)
    inner = d.get(outer)
    if inner is None:
        inner = d[outer] = {}
    elif not owned:
        inner = d[outer] = dict(inner)
    inner[k] = v
    return d


def _drop_nested(d: dict[str, dict], outer: str, k: Any) -> dict[str, dict]:
    inner = d.get(outer)
    if inner is None or k not in inner:
        return d
    d = dict(d)
    inner = dict(inner)
    del inner[k]
    if inner:
        d[outer] = inner
    else:
        del d[outer]
    return d


@dataclass(frozen=True)
class PolicyState:
    """Immutable snapshot. The policy builds a new one per mutation and swaps
    it in only when the whole operation succeeded: that is what keeps state
    unchanged on any error.

    Carries a ``StateIndex`` (not a field: equality and the checkpoint see only
    pools and entries), built on first use and derived incrementally by the
    ``with_*``/``without_*`` methods."""

    pools: dict[str, CPUSet] = field(default_factory=dict)
    entries: Entries = field(default_factory=dict)

    def index(self) -> StateIndex:
        ix = self.__dict__.get("_ix")
        if ix is None:
            ix = StateIndex.build(self.entries)
            object.__setattr__(self, "_ix", ix)
        return ix

    def _derived(self, entries: Entries, ix: StateIndex | None, pools: dict[str, CPUSet] | None = None) -> PolicyState:
        new = PolicyState(pools=self.pools if pools is None else pools, entries=entries)
        if ix is not None:
            object.__setattr__(new, "_ix", ix)
        return new

    def with_index(self, ix: StateIndex) -> PolicyState:
        """This state, just built, carrying ``ix`` (which must describe its
        entries); only for states no one else holds yet."""
        object.__setattr__(self, "_ix", ix)
        return self

    def get(self, pod_uid: str, container: str) -> AllocationInfo | None:
        return self.entries.get(pod_uid, {}).get(container)

    def containers(self) -> list[AllocationInfo]:
        return [a for pod in self.entries.values() for a in pod.values()]

    def with_entry(self, a: AllocationInfo) -> PolicyState:
        entries = dict(self.entries)
        pod = dict(entries.get(a.pod_uid, {}))
        old = pod.get(a.container_name)
        pod[a.container_name] = a
        entries[a.pod_uid] = pod
        ix = self.__dict__.get("_ix")
        return self._derived(entries, None if ix is None else ix.replaced(old, a))

    def without_entry(self, pod_uid: str, container: str) -> PolicyState:
        if container not in self.entries.get(pod_uid, {}):
            return self
        entries = dict(self.entries)
        pod = dict(entries[pod_uid])
        old = pod.pop(container)
        if pod:
            entries[pod_uid] = pod
        else:
            del entries[pod_uid]
        ix = self.__dict__.get("_ix")
        return self._derived(entries, None if ix is None else ix.replaced(old, None))

    def without_pod(self, pod_uid: str) -> PolicyState:
        if pod_uid not in self.entries:
            return self
        entries = dict(self.entries)
        pod = entries.pop(pod_uid)
        ix = self.__dict__.get("_ix")
        if ix is not None:
            for a in pod.values():
                ix = ix.replaced(a, None)
        return self._derived(entries, ix)

    def to_json(self) -> dict[str, Any]:
        return {
            "pools": {k: str(v) for k, v in sorted(self.pools.items())},
            "pod_entries": {
                uid: {c: a.to_json() for c, a in sorted(pod.items())} for uid, pod in sorted(self.entries.items())
            },
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PolicyState:
        pools = {str(k): CPUSet.parse(v) for k, v in d.get("pools", {}).items()}
        entries: Entries = {}
        for uid, pod in d.get("pod_entries", {}).items():
            entries[str(uid)] = {str(c): AllocationInfo.from_json(a) for c, a in pod.items()}
        return cls(pools=pools, entries=entries)


@dataclass(frozen=True)
class NUMAState:
    """One NUMA node as the hint and dedicated handlers see it."""

    id: int
    default_cpuset: CPUSet  # NUMA CPUs not held by dedicated numa_binding containers
    allocated_cpuset: CPUSet  # held by dedicated numa_binding containers
    #: (pod_uid, container) -> the container's CPUs in this NUMA
    pod_entries: dict[tuple[str, str], CPUSet] = field(default_factory=dict, hash=False)


def machine_state(idx: TopoIndex, state: PolicyState, with_entries: bool = False) -> dict[int, NUMAState]:
    """Regenerate per-NUMA state from container entries (pools excluded).

    Only dedicated numa_binding containers shape default/allocated (memoised
    per set of them); the per-NUMA container slices (``with_entries``) cost a
    pass over every CPU of every container and are built only for views that
    show them."""
    if not with_entries:
        return dict(state.index().memo_by_ded(("machine_state", idx), lambda: _machine_state(idx, state, False)))
    return _machine_state(idx, state, True)


def _machine_state(idx: TopoIndex, state: PolicyState, with_entries: bool) -> dict[int, NUMAState]:
    allocated: dict[int, set[int]] = {n: set() for n in idx.numa_ids}
    per_numa: dict[int, dict[tuple[str, str], set[int]]] = {n: {} for n in idx.numa_ids}
    if with_entries:
        for a in state.containers():
            dedicated = a.is_dedicated_binding and not a.is_sidecar
            for i in a.cpuset:
                n = idx.numa_of.get(i)
                if n is None:
                    continue
                per_numa[n].setdefault((a.pod_uid, a.container_name), set()).add(i)
                if dedicated:
                    allocated[n].add(i)
    else:
        for cpus in state.index().ded.values():
            for i in cpus:
                n = idx.numa_of.get(i)
                if n is not None:
                    allocated[n].add(i)
    return {
        n: NUMAState(
            id=n,
            default_cpuset=CPUSet(idx.numa_cpus[n] - allocated[n]) if allocated[n] else idx.numa_cpusets[n],
            allocated_cpuset=CPUSet(allocated[n]) if allocated[n] else _EMPTY,
            pod_entries={k: CPUSet(v) for k, v in per_numa[n].items()},
        )
        for n in idx.numa_ids
    }


_EMPTY = CPUSet()


@dataclass(frozen=True)
class Change:
    """What one committed policy call did, as the journal records it: the
    entries it wrote (their values are taken from the new state), the ones it
    removed, and whether pools were re-sized (``adjusted``: then every pool
    follower holds its pool's new cpuset, every ramp-up container the ramp
    set, every system container all CPUs, as ``pools.adjust`` guarantees)."""

    put: tuple[Key, ...] = ()
    drop: tuple[Key, ...] = ()
    drop_pods: tuple[str, ...] = ()
    adjusted: bool = False


QOS_LEVELS = (SHARED, DEDICATED, RECLAIMED, SYSTEM)
CONTAINER_TYPES = (MAIN, SIDECAR)


def validate_entry(uid: str, container: str, a: AllocationInfo) -> None:
    """Meaning of one stored entry (a checksum only proves the bytes are the
    ones written): ValueError when it could not have come from the policy."""
    where = f"entry {uid}/{container}"
    if a.pod_uid != uid or a.container_name != container:
        raise ValueError(f"{where} is filed under another key ({a.pod_uid}/{a.container_name})")
    if not uid or not container:
        raise ValueError(f"{where}: empty pod uid or container name")
    if a.qos_level not in QOS_LEVELS:
        raise ValueError(f"{where}: unknown QoS level {a.qos_level!r}")
    if a.container_type not in CONTAINER_TYPES:
        raise ValueError(f"{where}: unknown container type {a.container_type!r}")
    for name, v in (("request_quantity", a.request_quantity), ("init_timestamp", a.init_timestamp)):
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"{where}: {name} {v!r} is negative or not finite")
    if a.container_index < 0:
        raise ValueError(f"{where}: negative container_index {a.container_index}")
    if a.qos_level == DEDICATED and not a.is_sidecar and not a.cpuset:
        raise ValueError(f"{where}: dedicated container without cpus")
    if a.cgroup_path is not None and not isinstance(a.cgroup_path, str):
        raise ValueError(f"{where}: cgroup_path is not a string")


def validate_state(st: PolicyState, online: Collection[int] | None = None) -> None:
    """Invariants every state the policy commits holds: valid entries, no CPU
    in two dedicated containers, dedicated CPUs outside the reserve and shared
    pools, no pool overlapping the reserve, pools and cpusets within
    ``online`` (when given). ValueError names the first violation."""
    owner: dict[int, Key] = {}
    for uid, pod in st.entries.items():
        for c, a in pod.items():
            validate_entry(uid, c, a)
            if online is not None and not set(a.cpuset) <= set(online):
                raise ValueError(f"entry {uid}/{c}: cpus {a.cpuset - CPUSet(online)} do not exist on this machine")
            if a.is_dedicated_binding and not a.is_sidecar:
                for i in a.cpuset:
                    other = owner.setdefault(i, (uid, c))
                    if other != (uid, c):
                        raise ValueError(f"cpu {i} is held by two dedicated containers: {other[0]}/{other[1]} "
                                         f"and {uid}/{c}")
    dedicated = set(owner)
    reserve = set(st.pools.get(RESERVE_POOL, ()))
    for name, cpus in st.pools.items():
        if not name:
            raise ValueError("a pool with an empty name")
        if online is not None and not set(cpus) <= set(online):
            raise ValueError(f"pool {name}: cpus {cpus - CPUSet(online)} do not exist on this machine")
        if name != RESERVE_POOL and reserve & set(cpus):
            raise ValueError(f"pool {name} overlaps the reserve pool on cpus {CPUSet(reserve & set(cpus))}")
        if name != RECLAIM_POOL and dedicated & set(cpus):
            which = "reserve pool" if name == RESERVE_POOL else f"shared pool {name}"
            raise ValueError(f"{which} overlaps dedicated cpus {CPUSet(dedicated & set(cpus))}")


def repoint_followers(st: PolicyState, pools: dict[str, CPUSet], ramp: CPUSet, all_cpus: CPUSet,
                      keep: Collection[Key] = ()) -> PolicyState:
    """The pool adjustment's effect on followers, without the sizing: every
    follower of a pool gets the pool's cpuset, every ramp-up container
    ``ramp`` (and no owner pool), every system container ``all_cpus``;
    entries in ``keep`` (written explicitly since) are left as they are.
    Journal replay uses it to rebuild what an ``adjusted`` change did."""
    ix = st.index()
    entries = dict(st.entries)
    fresh: set[str] = set()

    def put(key: Key, a: AllocationInfo) -> None:
        uid, c = key
        if uid not in fresh:
            entries[uid] = dict(entries[uid])
            fresh.add(uid)
        entries[uid][c] = a

    for name, members in ix.follow.items():
        target = pools.get(name)
        if target is None:
            continue
        for key in members:
            a = entries[key[0]][key[1]]
            if key not in keep and a.cpuset != target:
                put(key, a.with_cpuset(target))
    for key in ix.ramp:
        a = entries[key[0]][key[1]]
        if key not in keep and (a.cpuset != ramp or a.owner_pool_name):
            put(key, a.evolve(cpuset=ramp, owner_pool_name=""))
    for key in ix.system:
        a = entries[key[0]][key[1]]
        if key not in keep and a.cpuset != all_cpus:
            put(key, a.with_cpuset(all_cpus))
    if not fresh:
        return st
    return PolicyState(pools=st.pools, entries=entries).with_index(ix)
