"""Policy state: container allocations and pools, plus the per-NUMA machine
state derived from them.

Differences from upstream's encoding, on purpose: pools are a separate map
(upstream stores them as pseudo-pods with container key ""), and machine state
is never stored as truth — it is always regenerated from the entries
(upstream also regenerates it on restore, then rewrites it).
"""

from __future__ import annotations

import math
from fractions import Fraction
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agent.contracts.cpu import MAIN, SIDECAR, AllocationInfo
from agent.cpu.calculator import TopoIndex
from agent.cpu.qos import DEDICATED, RECLAIM_POOL, RECLAIMED, RESERVE_POOL, SHARED, SYSTEM
from agent.cpuset import CPUSet
from agent.sharedvalues import text

__all__ = [
    "AllocationInfo",
    "Basis",
    "Change",
    "NUMAState",
    "PMap",
    "PolicyState",
    "ResolvedEntries",
    "StateIndex",
    "machine_state",
    "moved_keys",
    "repoint_followers",
    "validate_entry",
    "validate_state",
]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
_ZERO = Fraction(0)



Entries = dict[str, dict[str, AllocationInfo]]
Pod = dict[str, AllocationInfo]
_GONE: Any = object()
_MISSING: Any = object()


class PMap(Mapping[K, V]):
    """A persistent mapping: ``put``/``drop`` give a new map and leave this one as
    it was, at a cost that does not grow with the node. The policy's states (pod
    uid -> entries) and their index's large sets (pool members, ramp-up set,
    keys changed since the last re-size) are kept in these.

    A dict copied per change cost O(pods) per call (0.4 ms at 10,000 pods, three
    times per dedicated Admit and Remove). Here a change copies a small overlay
    of the keys changed since the last merge; the overlay is merged into a new
    base once it holds more than about sqrt(len) of them, so each change costs
    O(sqrt(len)) element copies in C, amortised. Neither dict is mutated once a
    map holds it (the map takes ownership of the dict it is made from).
    Iteration: the base's order, then keys added since."""

    __slots__ = ("_base", "_over", "_len")

    def __init__(self, base: dict[K, V] | None = None) -> None:
        self._base: dict[K, V] = {} if base is None else base
        self._over: dict[K, Any] = {}
        self._len = len(self._base)

    def _new(self, over: dict[K, Any], n: int) -> PMap[K, V]:
        m: PMap[K, V] = object.__new__(PMap)
        m._base, m._over, m._len = self._base, over, n
        if len(over) > 32 and len(over) * len(over) > n:
            base = dict(self._base)  # copied in C, then the overlay's few keys applied
            for k, v in over.items():
                if v is _GONE:
                    del base[k]
                else:
                    base[k] = v
            m._base, m._over = base, {}
        return m

    def __getitem__(self, uid: K) -> V:
        v = self._over.get(uid, _MISSING)
        if v is _MISSING:
            return self._base[uid]
        if v is _GONE:
            raise KeyError(uid)
        return v

    def get(self, uid: K, default: Any = None) -> Any:
        v = self._over.get(uid, _MISSING)
        if v is _MISSING:
            return self._base.get(uid, default)
        return default if v is _GONE else v

    def __contains__(self, uid: object) -> bool:
        v = self._over.get(uid, _MISSING)  # type: ignore[arg-type]
        return uid in self._base if v is _MISSING else v is not _GONE

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        over = self._over
        if not over:
            yield from self._base
            return
        for uid in self._base:
            if over.get(uid, _MISSING) is not _GONE:
                yield uid
        for uid, v in over.items():
            if v is not _GONE and uid not in self._base:
                yield uid

    def items(self) -> Iterator[tuple[K, V]]:  # type: ignore[override]
        over = self._over
        if not over:
            yield from self._base.items()
            return
        for uid, pod in self._base.items():
            v = over.get(uid, _MISSING)
            if v is _MISSING:
                yield uid, pod
            elif v is not _GONE:
                yield uid, v
        for uid, v in over.items():
            if v is not _GONE and uid not in self._base:
                yield uid, v

    def values(self) -> Iterator[V]:  # type: ignore[override]
        return (v for _, v in self.items())

    def put(self, uid: K, value: V) -> PMap[K, V]:
        over = dict(self._over)
        over[uid] = value
        return self._new(over, self._len + (uid not in self))

    def drop(self, uid: K) -> PMap[K, V]:
        if uid not in self:
            return self
        over = dict(self._over)
        if uid in self._base:
            over[uid] = _GONE
        else:
            del over[uid]
        return self._new(over, self._len - 1)

    def changed_keys(self, other: PMap[K, V]) -> list[K]:
        """Keys whose value is not the same object here and in ``other`` (added, dropped or
        replaced): O(keys changed since the two maps' common base) when they share one, a
        pass over both otherwise (after the overlay is merged, every ~sqrt(len) changes)."""
        if self is other:
            return []
        if self._base is other._base:
            keys: set[Any] = set(self._over) | set(other._over)
        else:
            keys = set(self) | set(other)
        return [k for k in keys if self.get(k, _MISSING) is not other.get(k, _MISSING)]


Key = tuple[str, str]


@dataclass(frozen=True)
class Basis:
    """The targets of the last pool re-size: every member of an index that is
    not ``touched`` resolves to these (``PolicyState.resolve``), whatever cpuset
    it is stored with.

    ``pools`` holds the re-sized pools and, carried over, the earlier targets of
    pools that re-size dropped (their members keep what they had)."""

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
      pool's (not ramping up); ``qty[pool]``: the shared ones' requests, and
      ``qty_sum[pool]`` their exact sum (a ``Fraction``: the same whatever the
      order members came and went in, and kept per change instead of summed
      over every member at each re-size);
    - ``ramp``: shared/reclaimed main containers ramping up (they get every
      CPU the shared pools may use); ``system``: system_cores containers;
    - ``ded``: dedicated numa_binding main containers and their cpusets;
    - ``sidecar_pods``: pods holding a sidecar, and how many;
    - ``qos_counts``: containers per QoS level; ``n_shared``: shared mains;
    - ``basis`` / ``touched``: see ``Basis``; keys changed since it was set.
    """

    __slots__ = ("follow", "qty", "qty_sum", "ramp", "system", "ded", "sidecar_pods", "qos_counts", "n_shared",
                 "basis", "touched", "_memo")  # fmt: skip

    def __init__(self) -> None:
        # the sets that grow with the node are PMaps once built (plain dicts while ``build`` fills them)
        self.follow: dict[str, Mapping[Key, None]] = {}
        self.qty: dict[str, Mapping[Key, float]] = {}
        self.qty_sum: dict[str, Fraction] = {}
        self.ramp: Mapping[Key, None] = {}
        self.system: Mapping[Key, None] = {}
        self.ded: dict[Key, CPUSet] = {}
        self.sidecar_pods: Mapping[str, int] = {}
        self.qos_counts: dict[str, int] = {}
        self.n_shared = 0
        self.basis: Basis | None = None
        self.touched: Mapping[Key, None] = PMap()
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
    def build(cls, entries: Mapping[str, Pod]) -> StateIndex:
        ix = cls()
        for pod in entries.values():
            for a in pod.values():
                ix._add(a, owned=True)
        ix.follow = {p: PMap(dict(m)) for p, m in ix.follow.items()}
        ix.qty = {p: PMap(dict(m)) for p, m in ix.qty.items()}
        ix.ramp, ix.system = PMap(dict(ix.ramp)), PMap(dict(ix.system))
        ix.sidecar_pods = PMap(dict(ix.sidecar_pods))
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
                    pool = a.owner_pool_name
                    self.qty = _put_nested(self.qty, pool, key, a.request_quantity, owned)
                    total = self.qty_sum.get(pool, _ZERO) + Fraction(a.request_quantity)
                    self.qty_sum = _put(self.qty_sum, pool, total, owned)
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
                    pool = a.owner_pool_name
                    self.qty = _drop_nested(self.qty, pool, key)
                    if pool in self.qty:
                        self.qty_sum = _put(self.qty_sum, pool, self.qty_sum[pool] - Fraction(a.request_quantity),
                                            False)
                    else:
                        self.qty_sum = _drop(self.qty_sum, pool)
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


def _inc(d: Any, k: Any, by: int, owned: bool) -> Any:
    n = d.get(k, 0) + by
    if n:
        return _put(d, k, n, owned)
    return _drop(d, k) if k in d else d


def _put(d: Any, k: Any, v: Any, owned: bool) -> Any:
    """``d`` with ``k`` set: a PMap's new version, a dict changed in place when
    ``owned`` (``build``), else a changed copy."""
    if isinstance(d, PMap):
        return d.put(k, v)
    if not owned:
        d = dict(d)
    d[k] = v
    return d


def _drop(d: Any, k: Any) -> Any:
    if isinstance(d, PMap):
        return d.drop(k)
    d = dict(d)
    d.pop(k, None)
    return d


def _put_nested(d: dict[str, Any], outer: str, k: Any, v: Any, owned: bool) -> dict[str, Any]:
    if not owned:
        d = dict(d)
    inner = d.get(outer)
    if inner is None:
        d[outer] = {k: v} if owned else PMap({k: v})
    else:
        d[outer] = _put(inner, k, v, owned)
    return d


def _drop_nested(d: dict[str, Any], outer: str, k: Any) -> dict[str, Any]:
    inner = d.get(outer)
    if inner is None or k not in inner:
        return d
    d = dict(d)
    inner = _drop(inner, k)
    if inner:
        d[outer] = inner
    else:
        del d[outer]
    return d


PodMap = PMap[str, Pod]


class PolicyState:
    """Immutable snapshot. The policy builds a new one per mutation and swaps
    it in only when the whole operation succeeded: that is what keeps state
    unchanged on any error.

    Pool members are stored by reference (issue 24): a shared/reclaimed
    container follows its pool, a ramp-up one the CPUs the shared pools may
    use, a system one every CPU, a sidecar its main container. A pool re-size
    records the new targets once (``StateIndex.basis``) instead of rewriting
    every member, so ``stored`` may hold a member's older cpuset; every read
    (``get``, ``pod``, ``entries``, ``containers``) resolves it to the current
    one. Only code that reads fields a re-size never changes (QoS, ramp-up,
    timestamps, requests) may scan ``stored``.

    Carries a ``StateIndex`` (built on first use from ``stored``, then derived
    incrementally by the ``with_*``/``without_*`` methods). Equality and the
    checkpoint see only pools and the resolved entries."""

    __slots__ = ("pools", "stored", "_ix", "_view")

    def __init__(self, pools: dict[str, CPUSet] | None = None, entries: Entries | PodMap | None = None) -> None:
        self.pools: dict[str, CPUSet] = {} if pools is None else pools
        #: pod uid -> container -> entry as written (see the class doc: read through ``get``/``entries``)
        self.stored: PodMap = entries if isinstance(entries, PMap) else PMap(entries)
        self._ix: StateIndex | None = None
        self._view: ResolvedEntries | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PolicyState):
            return NotImplemented
        return self.pools == other.pools and self.entries == other.entries

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PolicyState(pools={self.pools!r}, entries={dict(self.entries)!r})"

    def index(self) -> StateIndex:
        ix = self._ix
        if ix is None:
            ix = self._ix = StateIndex.build(self.stored)
        return ix

    def _derived(self, stored: PodMap, ix: StateIndex | None, pools: dict[str, CPUSet] | None = None) -> PolicyState:
        new = PolicyState(pools=self.pools if pools is None else pools, entries=stored)
        new._ix = ix
        return new

    def with_index(self, ix: StateIndex) -> PolicyState:
        """This state, just built, carrying ``ix`` (which must describe its
        entries); only for states no one else holds yet."""
        self._ix = ix
        self._view = None
        return self

    def with_pools(self, pools: dict[str, CPUSet]) -> PolicyState:
        """The same entries (and index: members keep resolving as they did) with ``pools``."""
        return self._derived(self.stored, self._ix, pools)

    # -- reads: members resolved ----------------------------------------------------
    @property
    def entries(self) -> ResolvedEntries:
        """pod uid -> container -> entry, every member holding its current cpuset
        (a mapping: ``uid in entries`` costs nothing; a pod is resolved when read)."""
        view = self._view
        if view is None:
            view = self._view = ResolvedEntries(self)
        return view

    def get(self, pod_uid: str, container: str) -> AllocationInfo | None:
        pod = self.stored.get(pod_uid)
        if pod is None:
            return None
        a = pod.get(container)
        return None if a is None else self.resolve(pod_uid, pod, a)

    def pod(self, pod_uid: str) -> dict[str, AllocationInfo]:
        """One pod's entries, resolved ({} when unknown)."""
        pod: Pod | None = self.stored.get(pod_uid)
        if pod is None:
            return {}
        out = None
        for c, a in pod.items():
            r = self.resolve(pod_uid, pod, a)
            if r is not a:
                if out is None:
                    out = dict(pod)
                out[c] = r
        return pod if out is None else out

    def containers(self) -> list[AllocationInfo]:
        return [a for pod in self.entries.values() for a in pod.values()]

    def resolve(self, uid: str, pod: dict[str, AllocationInfo], a: AllocationInfo) -> AllocationInfo:
        """``a`` (stored in ``pod`` of ``uid``) as it stands now: what the last pool
        re-size gave it unless it was written since, a sidecar its main's."""
        if a.container_type == SIDECAR:
            main = next((m for m in pod.values() if m.container_type == MAIN), None)
            if main is None:
                return a
            m = self._resolve_main(uid, main)
            if (a.cpuset is m.cpuset or a.cpuset == m.cpuset) and a.owner_pool_name == m.owner_pool_name:
                return a
            return a.evolve(cpuset=m.cpuset, owner_pool_name=m.owner_pool_name)
        return self._resolve_main(uid, a)

    def _resolve_main(self, uid: str, a: AllocationInfo) -> AllocationInfo:
        ix = self._ix
        if ix is None or ix.basis is None or (uid, a.container_name) in ix.touched:
            return a
        b = ix.basis
        q = a.qos_level
        if q == SHARED or q == RECLAIMED:
            if a.ramp_up:
                if (a.cpuset is b.ramp or a.cpuset == b.ramp) and not a.owner_pool_name:
                    return a
                return a.evolve(cpuset=b.ramp, owner_pool_name="")
            target = b.pools.get(a.owner_pool_name)
        elif q == SYSTEM:
            target = b.all_cpus
        else:
            return a
        if target is None or a.cpuset is target or a.cpuset == target:
            return a
        return a.with_cpuset(target)

    # -- changes ------------------------------------------------------------------------
    def with_entry(self, a: AllocationInfo) -> PolicyState:
        pod = dict(self.stored.get(a.pod_uid, {}))
        old = pod.get(a.container_name)
        pod[a.container_name] = a
        ix = self._ix
        return self._derived(self.stored.put(a.pod_uid, pod), None if ix is None else ix.replaced(old, a))

    def without_entry(self, pod_uid: str, container: str) -> PolicyState:
        if container not in self.stored.get(pod_uid, {}):
            return self
        pod = dict(self.stored[pod_uid])
        old = pod.pop(container)
        stored = self.stored.put(pod_uid, pod) if pod else self.stored.drop(pod_uid)
        ix = self._ix
        return self._derived(stored, None if ix is None else ix.replaced(old, None))

    def without_pod(self, pod_uid: str) -> PolicyState:
        if pod_uid not in self.stored:
            return self
        pod = self.stored[pod_uid]
        stored = self.stored.drop(pod_uid)
        ix = self._ix
        if ix is not None:
            for a in pod.values():
                ix = ix.replaced(a, None)
        return self._derived(stored, ix)

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
            # the key is the entries' own (interned) uid, not a second copy of it
            entries[text(str(uid))] = {text(str(c)): AllocationInfo.from_json(a) for c, a in pod.items()}
        return cls(pools=pools, entries=entries)


class ResolvedEntries(Mapping[str, dict[str, AllocationInfo]]):
    """``PolicyState.entries``: the stored entries, each pod resolved when it is
    read (membership, length and iteration cost nothing extra)."""

    __slots__ = ("_st",)

    def __init__(self, st: PolicyState) -> None:
        self._st = st

    def __getitem__(self, uid: str) -> dict[str, AllocationInfo]:
        if uid not in self._st.stored:
            raise KeyError(uid)
        return self._st.pod(uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._st.stored

    def __iter__(self) -> Iterator[str]:
        return iter(self._st.stored)

    def __len__(self) -> int:
        return len(self._st.stored)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


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
    on = None if online is None else CPUSet(online)
    # members share a few cpuset objects (CPUSet.parse, pools by reference): each distinct
    # one is checked against ``online`` once, not once per entry (issue 24: start-up cost)
    within: set[CPUSet] = set()
    for uid, pod in st.entries.items():
        for c, a in pod.items():
            validate_entry(uid, c, a)
            if on is not None and a.cpuset not in within:
                if not a.cpuset <= on:
                    raise ValueError(f"entry {uid}/{c}: cpus {a.cpuset - on} do not exist on this machine")
                within.add(a.cpuset)
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
        if on is not None and not cpus <= on:
            raise ValueError(f"pool {name}: cpus {cpus - on} do not exist on this machine")
        if name != RESERVE_POOL and reserve & set(cpus):
            raise ValueError(f"pool {name} overlaps the reserve pool on cpus {CPUSet(reserve & set(cpus))}")
        if name != RECLAIM_POOL and dedicated & set(cpus):
            which = "reserve pool" if name == RESERVE_POOL else f"shared pool {name}"
            raise ValueError(f"{which} overlaps dedicated cpus {CPUSet(dedicated & set(cpus))}")


def moved_keys(old: PolicyState, new: PolicyState) -> set[Key] | None:
    """The containers whose entry, as read (resolved), may differ between ``old`` and ``new``
    (either may be the later one: an undo goes back): every container of a pod whose stored
    entries were written, and, when a pool re-size came between them, the members of each
    pool (the ramp-up set, the system set) whose target changed, plus those written since
    the earlier re-size. A superset (a member re-pointed to an equal cpuset is named too);
    costs O(what changed), not a pass over the node. None: it cannot tell (a state without
    an index, or the first re-size): the caller compares every container it knows."""
    if old is new:
        return set()
    ob, nb = old._ix, new._ix
    b0 = ob.basis if ob is not None else None
    b1 = nb.basis if nb is not None else None
    if b0 is not b1 and (b0 is None or b1 is None or ob is None or nb is None):
        return None
    out: set[Key] = set()
    for uid in old.stored.changed_keys(new.stored):
        out.update((uid, c) for c in old.stored.get(uid, ()))
        out.update((uid, c) for c in new.stored.get(uid, ()))
    if b0 is not b1:
        assert b0 is not None and b1 is not None and ob is not None and nb is not None
        for pool in set(b0.pools) | set(b1.pools):
            if b0.pools.get(pool) != b1.pools.get(pool):
                out.update(ob.follow.get(pool, ()))
                out.update(nb.follow.get(pool, ()))
        if b0.ramp != b1.ramp:
            out.update(ob.ramp)
            out.update(nb.ramp)
        if b0.all_cpus != b1.all_cpus:
            out.update(ob.system)
            out.update(nb.system)
        out.update(ob.touched)
        out.update(nb.touched)
    for ix in (ob, nb):
        if ix is not None and ix.sidecar_pods:  # a sidecar follows its main
            for uid in {k[0] for k in out if k[0] in ix.sidecar_pods}:
                out.update((uid, c) for c in old.stored.get(uid, ()))
                out.update((uid, c) for c in new.stored.get(uid, ()))
    return out


def repoint_followers(st: PolicyState, pools: dict[str, CPUSet], ramp: CPUSet, all_cpus: CPUSet,
                      keep: Collection[Key] = ()) -> PolicyState:
    """The pool adjustment's effect on followers, without the sizing: every
    follower of a pool gets the pool's cpuset, every ramp-up container
    ``ramp`` (and no owner pool), every system container ``all_cpus``;
    entries in ``keep`` (written explicitly since) are left as they are.
    Journal replay uses it to rebuild what an ``adjusted`` change did, once,
    on a state whose entries are all explicit (no re-size basis of its own)."""
    ix = st.index()
    assert ix.basis is None, "replay states hold explicit entries"
    entries = dict(st.stored.items())
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
