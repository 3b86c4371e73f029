"""The dynamic CPU policy: hints, Allocate, RemovePod and the query calls.

Pure: no files, sockets or clocks of its own (the clock is injected). Every
mutation builds a new ``PolicyState`` and swaps it in only when the whole
operation succeeded, so a refused request leaves state exactly as it was.
Callers serialise calls (the daemon's single asyncio loop does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from agent.contracts.cpu import CPU_RESOURCE, AllocateResult, HintsResult, Request
from agent.contracts.hints import TopologyHint
from agent.cpu.calculator import TopoIndex, take_by_topology, take_ht_by_numa_balance
from agent.cpu.errors import FAILED_PRECONDITION, NOT_FOUND, PolicyError, RESOURCE_EXHAUSTED, invalid
from agent.cpu.hints import calculate_hints, min_numa_count
from agent.contracts.placement import Placement, placement_of
from agent.cpu.pools import (
    DEDICATED_NUMA_MODES,
    DedicatedNuma,
    PoolOptions,
    adjust,
    init_pools,
    no_reclaim_cpus,
    shared_available,
    shared_bounds,
    why_no_shared,
)
from agent.cpu.qos import (
    DEDICATED,
    DEDICATED_OWNER,
    DEFAULT_POOL,
    RECLAIM_POOL,
    RECLAIMED,
    RESERVE_POOL,
    SHARED,
    SYSTEM,
    QoS,
    parse_qos,
)
from agent.cpu.quantity import RESOURCE_RECLAIMED_MILLICPU, ceil_cpus, parse_request
from agent.cpu.state import Change, PolicyState, machine_state
from agent.contracts.cpu import INIT, MAIN, SIDECAR, AllocationInfo
from agent.cpuset import CPUSet
from agent.topology.model import Topology

__all__ = ["PolicyOptions", "DynamicPolicy", "reserved_cpus"]


@dataclass(frozen=True)
class PolicyOptions:
    reserved_count: int = 0
    #: explicit reserved list (wins over reserved_count when set)
    reserved_list: CPUSet | None = None
    reclaim_min: int = 4
    enable_reclaim: bool = False
    transition_period_s: float = 30.0
    debug_annotation_keys: tuple[str, ...] = ()
    enhancement_defaults: Mapping[str, str] = field(default_factory=dict)
    align_l3: bool = True
    #: what a NUMA-bound dedicated container takes out of the shared pools: its
    #: CPUs ("exclusive-cores") or its whole node ("whole-node", Katalyst's 14.4,
    #: the default here because the upstream fixtures' expectations depend on it)
    dedicated_numa: DedicatedNuma = "whole-node"


def reserved_cpus(idx: TopoIndex, opts: PolicyOptions) -> CPUSet:
    """Reserved CPUs: the explicit list, or one hyperthread per NUMA round-robin."""
    if opts.reserved_list is not None:
        if not opts.reserved_list <= CPUSet(idx.all):
            raise ValueError(f"reserved cpus {opts.reserved_list} are not all online cpus of this machine")
        return opts.reserved_list
    if opts.reserved_count < 0 or opts.reserved_count >= len(idx.all):
        raise ValueError(f"reserved cpu count {opts.reserved_count} must be in 0..{len(idx.all) - 1}")
    return take_ht_by_numa_balance(idx, CPUSet(idx.all), opts.reserved_count)


class DynamicPolicy:
    def __init__(
        self,
        topology: Topology,
        options: PolicyOptions | None = None,
        state: PolicyState | None = None,
        clock: Callable[[], float] = time.time,
        pod_running: Callable[[str], bool | None] | None = None,
    ) -> None:
        self.options = options or PolicyOptions()
        self.idx = TopoIndex(topology)
        self.topology = topology
        self.clock = clock
        #: whether a pod is already running (upstream asks the metaServer); None
        #: or unknown means "ramp up", as upstream does for pods it cannot see
        self.pod_running = pod_running or (lambda uid: None)
        self.reserved = reserved_cpus(self.idx, self.options)
        if self.options.dedicated_numa not in DEDICATED_NUMA_MODES:
            raise ValueError(f"dedicated_numa must be one of {', '.join(DEDICATED_NUMA_MODES)}, "
                             f"got {self.options.dedicated_numa!r}")
        self.pool_opts = PoolOptions(self.options.reclaim_min, self.options.enable_reclaim,
                                     self.options.dedicated_numa)
        self._state = self._restore(state or PolicyState())
        #: called with the new state after every committed change
        self.listeners: list[Callable[[PolicyState], None]] = []
        #: what the last committed change did (read by listeners that journal it)
        self.last_change = Change()

    # -- state ------------------------------------------------------------------
    @property
    def state(self) -> PolicyState:
        return self._state

    def _restore(self, st: PolicyState) -> PolicyState:
        online = CPUSet(self.idx.all)
        for a in st.containers():
            if not a.cpuset <= online:
                raise ValueError(
                    f"checkpointed cpuset {a.cpuset} of {a.pod_uid}/{a.container_name} has cpus this machine "
                    f"does not have online ({online}); the topology changed under the checkpoint"
                )
        ix = st.index()
        if ix.n_shared and not shared_available(self.idx, st, self.reserved, self.pool_opts.dedicated_numa):
            # a state placed under exclusive-cores, read under whole-node: the next
            # re-size (any RemovePod included) would find no CPU for its shared pods
            raise ValueError(
                "the checkpoint holds shared containers on NUMA nodes that dedicated containers are bound to "
                '(placed under dedicated_numa = "exclusive-cores"), which dedicated_numa = '
                f'"{self.pool_opts.dedicated_numa}" leaves no cpu for; start with dedicated_numa = '
                '"exclusive-cores", or remove the dedicated or the shared pods first'
            )
        return init_pools(self.idx, st, self.reserved, self.pool_opts)

    def _commit(self, st: PolicyState, put: tuple[tuple[str, str], ...] = (), drop_pods: tuple[str, ...] = ()) -> None:
        old = self._state
        if st is old:
            return
        ob, nb = old._ix, st._ix
        adjusted = nb is not None and nb.basis is not None and (ob is None or nb.basis is not ob.basis)
        self.last_change = Change(put=put, drop_pods=drop_pods, adjusted=adjusted)
        self._state = st
        for cb in list(self.listeners):
            cb(st)

    def reset_state(self, st: PolicyState) -> None:
        """Put back an earlier state (a change that could not be made durable
        is undone); listeners are not called: the caller knows."""
        self._state = st

    # -- request parsing --------------------------------------------------------
    def _qos(self, req: Request) -> QoS:
        return parse_qos(req.annotations, req.labels, self.options.enhancement_defaults)

    def _is_debug(self, req: Request) -> bool:
        return any(k in req.annotations for k in self.options.debug_annotation_keys)

    def _check_common(self, req: Request) -> tuple[QoS, float]:
        if not req.pod_uid:
            raise invalid("bad_request", "pod_uid is empty")
        if not req.container_name:
            raise invalid("bad_request", "container_name is empty")
        if req.resource_name and req.resource_name not in (CPU_RESOURCE, RESOURCE_RECLAIMED_MILLICPU):
            raise invalid("bad_request", f"resource_name {req.resource_name!r} is not served by the cpu plugin")
        qos = self._qos(req)
        qty = parse_request(req.resource_requests)
        if ceil_cpus(qty) > len(self.idx.all):
            raise invalid(
                "too_many_cpus", f"request of {qty:g} cpus exceeds the {len(self.idx.all)} cpus of this machine"
            )
        if qos.level == DEDICATED:
            if not qos.numa_binding:
                raise invalid("dedicated_without_numa_binding", "dedicated_cores without numa_binding is not supported")
            if ceil_cpus(qty) <= 0:
                raise invalid("bad_quantity", "dedicated_cores needs a request of at least 1 cpu")
            min_numa_count(self.idx, self.reserved, ceil_cpus(qty))
        return qos, qty

    # -- hints ------------------------------------------------------------------
    def get_topology_hints(self, req: Request) -> HintsResult:
        return self.hints_in(self._state, req)

    def hints_in(self, st: PolicyState, req: Request) -> HintsResult:
        """GetTopologyHints against ``st`` (the live state, or a plan's copy): pure."""
        qos, qty = self._check_common(req)
        none = HintsResult(None, qos.labels, qos.annotations)
        if req.container_type == INIT or self._is_debug(req) or req.container_type == SIDECAR:
            return none
        if qos.level != DEDICATED:
            return none
        need = ceil_cpus(qty)
        cur = st.get(req.pod_uid, req.container_name)
        if cur is not None and cur.is_dedicated_binding and len(cur.cpuset) >= need:
            nodes = frozenset(self.idx.assignments(cur.cpuset))
            return HintsResult([TopologyHint(nodes, True)], qos.labels, qos.annotations)
        if cur is not None:
            st = st.without_entry(req.pod_uid, req.container_name)
        ms = machine_state(self.idx, st)
        hints = calculate_hints(self.idx, ms, self.reserved, need, qos.numa_exclusive)
        return HintsResult(hints, qos.labels, qos.annotations)

    # -- allocate ---------------------------------------------------------------
    def allocate(self, req: Request) -> AllocateResult:
        result, st = self.plan(self._state, req)
        if st is not None:
            self._commit(st, put=((req.pod_uid, req.container_name),))
        return result

    def plan(self, state: PolicyState, req: Request) -> tuple[AllocateResult, PolicyState | None]:
        """Allocate against ``state`` without committing: the answer and the state
        it leaves (None when nothing changes). Pure: admission decides a whole pod
        on a copy of the state with it, and ``allocate`` is this plus the commit,
        so a decision and the allocation that follows are one computation."""
        qos, qty = self._check_common(req)
        if req.container_type == INIT:
            return AllocateResult(None, qos.labels, qos.annotations, hint=req.hint), None
        if self._is_debug(req):
            return AllocateResult(None, qos.labels, qos.annotations, debug=True, hint=req.hint), None
        need = ceil_cpus(qty)
        cur = state.get(req.pod_uid, req.container_name)
        if cur is not None and cur.qos_level == qos.level and len(cur.cpuset) >= need:
            return AllocateResult(cur, qos.labels, qos.annotations, hint=req.hint), None
        base = state.without_entry(req.pod_uid, req.container_name) if cur is not None else state
        now = self.clock()
        entry = AllocationInfo(
            pod_uid=req.pod_uid,
            pod_namespace=req.pod_namespace,
            pod_name=req.pod_name,
            container_name=req.container_name,
            container_type=req.container_type if req.container_type in (MAIN, SIDECAR) else MAIN,
            container_index=req.container_index,
            qos_level=qos.level,
            request_quantity=qty,
            cpuset=CPUSet(),
            numa_binding=qos.numa_binding,
            numa_exclusive=qos.numa_exclusive,
            init_timestamp=now,
            labels=qos.labels,
            annotations=qos.annotations,
            pod_role=req.pod_role,
            pod_type=req.pod_type,
            native_qos_class=req.native_qos_class,
            cgroup_path=cur.cgroup_path if cur is not None else None,
        )
        if req.container_type == SIDECAR:
            st = self._allocate_sidecar(base, entry)
            if st is None:
                return AllocateResult(None, qos.labels, qos.annotations, hint=req.hint, empty=True), None
        elif qos.level == DEDICATED:
            st = self._allocate_dedicated(base, entry, req.hint, need)
        elif qos.level == SHARED:
            st = self._allocate_shared(base, entry, qos)
        elif qos.level == RECLAIMED:
            st = self._allocate_reclaimed(base, entry)
        elif qos.level == SYSTEM:
            st = base.with_entry(replace(entry, cpuset=CPUSet(self.idx.all)))
        else:  # pragma: no cover - parse_qos rejects anything else
            raise invalid("unknown_qos", f"unknown QoS level {qos.level!r}")
        got = st.get(req.pod_uid, req.container_name)
        assert got is not None
        return AllocateResult(got, qos.labels, qos.annotations, hint=req.hint), st

    @staticmethod
    def _pool_of(qos: QoS) -> str:
        return qos.cpuset_pool or DEFAULT_POOL

    def _allocate_sidecar(self, st: PolicyState, entry: AllocationInfo) -> PolicyState | None:
        main = next((a for a in st.entries.get(entry.pod_uid, {}).values() if a.container_type == MAIN), None)
        if main is None:
            return None
        return st.with_entry(replace(entry, cpuset=main.cpuset, owner_pool_name=main.owner_pool_name, ramp_up=False))

    def _allocate_dedicated(self, st: PolicyState, entry: AllocationInfo, hint: TopologyHint | None, need: int) -> PolicyState:
        if hint is None or not hint.affinity:
            raise invalid("bad_hint", "dedicated_cores with numa_binding needs a non-empty topology hint")
        nodes = sorted(hint.affinity)
        bad = [n for n in nodes if n not in self.idx.numa_cpus]
        if bad:
            raise invalid("bad_hint", f"hint names NUMA node(s) {bad} this machine does not have")
        if not entry.numa_exclusive and len(nodes) > 1:
            raise invalid("bad_hint", f"non-exclusive numa_binding needs a single-node hint, got {nodes}")
        ms = machine_state(self.idx, st)
        if entry.numa_exclusive:
            busy = [n for n in nodes if ms[n].allocated_cpuset]
            if busy:
                raise PolicyError(
                    RESOURCE_EXHAUSTED,
                    "numa_busy",
                    f"numa_exclusive request on NUMA node(s) {busy} that already hold dedicated containers",
                )
        avail = CPUSet.union_all(ms[n].default_cpuset for n in nodes) - self.reserved
        if len(avail) < need:
            raise PolicyError(
                RESOURCE_EXHAUSTED,
                "insufficient_cpus",
                f"NUMA node(s) {nodes} have {len(avail)} free cpus, request needs {need}",
            )
        # quirk 14.3 kept: exclusive takes every free CPU of the node(s)
        cpus = avail if entry.numa_exclusive else take_by_topology(self.idx, avail, need, self.options.align_l3)
        new = replace(entry, cpuset=cpus, owner_pool_name=DEDICATED_OWNER, ramp_up=True)
        return adjust(self.idx, st.with_entry(new), self.reserved, self.pool_opts)

    def _allocate_shared(self, st: PolicyState, entry: AllocationInfo, qos: QoS) -> PolicyState:
        pool = self._pool_of(qos)
        ramp_cpus = shared_available(self.idx, st, self.reserved, self.pool_opts.dedicated_numa)
        if not ramp_cpus:
            raise PolicyError(RESOURCE_EXHAUSTED, "no_shared_cpus",
                              f"no cpu is left for shared_cores ({why_no_shared(self.pool_opts.dedicated_numa)})")
        running = self.pod_running(entry.pod_uid)
        if running is not True or pool not in st.pools:
            return st.with_entry(replace(entry, cpuset=ramp_cpus, owner_pool_name="", ramp_up=True))
        return adjust(self.idx, st.with_entry(replace(entry, owner_pool_name=pool)), self.reserved, self.pool_opts)

    def _allocate_reclaimed(self, st: PolicyState, entry: AllocationInfo) -> PolicyState:
        cpus = st.pools.get(RECLAIM_POOL)
        if cpus is None:
            raise PolicyError(FAILED_PRECONDITION, "reclaim_not_ready", "pool reclaim is not ready")
        if not cpus:
            if self.pool_opts.dedicated_numa == "exclusive-cores":
                raise no_reclaim_cpus("no cpu is left for reclaimed_cores")
            raise PolicyError(FAILED_PRECONDITION, "reclaim_empty", "pool reclaim is empty")
        return st.with_entry(replace(entry, cpuset=cpus, owner_pool_name=RECLAIM_POOL))

    # -- removal ------------------------------------------------------------------
    def remove_pod(self, pod_uid: str) -> bool:
        """Forget a pod; True when it was known."""
        if pod_uid not in self._state.entries:
            return False
        self._commit(adjust(self.idx, self._state.without_pod(pod_uid), self.reserved, self.pool_opts),
                     drop_pods=(pod_uid,))
        return True

    def set_cgroup_path(self, pod_uid: str, container: str, path: str | None) -> None:
        cur = self._state.get(pod_uid, container)
        if cur is None:
            raise PolicyError(NOT_FOUND, "not_found", f"container {pod_uid}/{container} is not in cpu plugin state")
        if cur.cgroup_path != path:
            self._commit(self._state.with_entry(replace(cur, cgroup_path=path)), put=((pod_uid, container),))

    # -- the advisor's size of the shared pool ------------------------------------------
    def resize_shared(self, size: int | None, cpus: CPUSet | None = None) -> bool:
        """Give the default shared pool at least ``size`` CPUs (None: back to the size its
        requests give), taken from the reclaim pool; True when the pools changed. From the
        first call on the advisor sizes the pools: idle CPUs stay in the reclaim pool
        (``PoolOptions.advised``) instead of going to the shared pools.

        ``cpus``: where the pool should be (the advisor's NUMA placement,
        agent/advisor/placement.py); the pool is carved out of them first, now and on every
        later re-size, topped up or trimmed to its size by topology. They must be CPUs the
        pool may hold (``shared_room``): a reserved or dedicated CPU, or one of another shared
        pool, is refused, and a refused call changes nothing. None: round-robin over the
        NUMA nodes, as the policy places every pool.

        Goes through the one re-size every change uses (``adjust``), so the pool's
        invariants hold as for any Allocate: never a reserved or dedicated CPU, never
        below requests, no CPU in two shared pools; the change is committed (journaled
        by the durable policy) like any other. Later re-sizes keep the size until the
        advisor changes it; a refused re-size changes nothing."""
        if size is not None and (not isinstance(size, int) or size < 1):
            raise invalid("bad_size", f"shared pool size must be a whole number of cpus >= 1 or none, got {size!r}")
        if cpus is not None:
            if not cpus:
                raise invalid("bad_cpus", "the shared pool's placement is empty: give its cpus, or none")
            room = self.shared_room()
            if not cpus <= room:
                raise invalid("bad_cpus", f"cpus {cpus - room} of the shared pool's placement {cpus} are reserved, "
                              f"dedicated or another shared pool's: it may hold {room or 'none'} now")
        opts = replace(self.pool_opts, shared_size=size, advised=True, shared_cpus=cpus)
        if opts == self.pool_opts:
            return False
        st = adjust(self.idx, self._state, self.reserved, opts)
        self.pool_opts = opts
        if dict(st.pools) == dict(self._state.pools):
            return False  # the size is remembered for later re-sizes; nothing moves now
        self._commit(st)
        return True

    def shared_room(self) -> CPUSet:
        """CPUs the default shared pool may hold now: neither reserved, dedicated (under
        ``whole-node``: on no node a dedicated pod is bound to) nor another shared pool's."""
        others = [c for p, c in self._state.pools.items() if p not in (DEFAULT_POOL, RECLAIM_POOL, RESERVE_POOL)]
        return shared_available(self.idx, self._state, self.reserved, self.pool_opts.dedicated_numa) \
            - CPUSet.union_all(others)

    def static_pools(self) -> bool:
        """Back to the request-sized pools (the advisor is off): a checkpoint written while the
        advisor sized the pools keeps its pools at restart (``init_pools``), and with nobody to
        shrink them the shared pool would stay grown until some later change; True when the
        pools changed (committed, so journaled, like any re-size). A checkpoint written with the
        advisor off already has these pools: nothing moves."""
        opts = replace(self.pool_opts, shared_size=None, advised=False, shared_cpus=None)
        st = adjust(self.idx, self._state, self.reserved, opts)
        self.pool_opts = opts
        if dict(st.pools) == dict(self._state.pools):
            return False
        self._commit(st)
        return True

    def shared_bounds(self) -> tuple[int, int]:
        """(fewest, most) CPUs the default shared pool may have now (see pools.shared_bounds)."""
        return shared_bounds(self.idx, self._state, self.reserved, self.pool_opts)

    # -- ramp-up ------------------------------------------------------------------
    def complete_ramp_up(self) -> bool:
        """End ramp-up for containers older than the transition period (upstream
        does this lazily in GetResourcesAllocation; hwagent also calls it from its
        periodic loop so standalone mode converges). True when state changed."""
        now = self.clock()
        st = self._state
        period = self.options.transition_period_s
        # ramp-up and timestamps are stored as written (a re-size changes cpusets only): scan those
        due_keys = [(uid, c) for uid, pod in st.stored.items() for c, a in pod.items()
                    if a.ramp_up and now >= a.init_timestamp + period]
        if not due_keys:
            return False
        due = [a for a in (st.get(uid, c) for uid, c in due_keys) if a is not None]
        for a in due:
            if a.qos_level == SHARED:
                pool = a.annotations.get("cpuset_pool", DEFAULT_POOL)
                st = st.with_entry(replace(a, ramp_up=False, owner_pool_name=pool))
            else:
                st = st.with_entry(replace(a, ramp_up=False))
        if any(a.qos_level == SHARED for a in due):
            st = adjust(self.idx, st, self.reserved, self.pool_opts)
        self._commit(st, put=tuple((a.pod_uid, a.container_name) for a in due))
        return True

    # -- queries ------------------------------------------------------------------
    def resources_allocation(self) -> list[AllocationInfo]:
        """GetResourcesAllocation: every container entry (side effect: ramp-up)."""
        self.complete_ramp_up()
        return self._state.containers()

    def container(self, pod_uid: str, container: str) -> AllocationInfo:
        a = self._state.get(pod_uid, container)
        if a is None:
            raise PolicyError(
                NOT_FOUND, "not_found", f"container {pod_uid}/{container} is not show up in cpu plugin state"
            )
        return a

    def placement(self, pod_uid: str, container: str) -> Placement | None:
        """The CPUs (and memory nodes) a container has now; None when the policy holds
        nothing of it (released, never allocated, an init container)."""
        a = self._state.get(pod_uid, container)
        return None if a is None else placement_of(a.cpuset, a.numa_binding, self.idx.numa_of)

    def shared_cpus(self, st: PolicyState | None = None) -> CPUSet:
        """Where a container without CPUs of its own (an init container) runs in ``st``
        (the live state by default): the shared pool, else what shared pods may use."""
        st = self._state if st is None else st
        return st.pools.get(DEFAULT_POOL) or shared_available(self.idx, st, self.reserved,
                                                              self.pool_opts.dedicated_numa)

    def free_per_numa(self) -> dict[int, int]:
        """Dedicatable CPUs per NUMA node now: not held by NUMA-bound containers, reserved excluded."""
        ms = machine_state(self.idx, self._state)
        return {n: len(ms[n].default_cpuset - self.reserved) for n in self.idx.numa_ids}

    def allocatable(self) -> tuple[dict[int, int], dict[int, int]]:
        """(capacity per NUMA, allocatable per NUMA = capacity - reserved)."""
        cap = {n: len(self.idx.numa_cpus[n]) for n in self.idx.numa_ids}
        alloc = {n: len(self.idx.numa_cpus[n] - frozenset(self.reserved)) for n in self.idx.numa_ids}
        return cap, alloc

    def options_dict(self) -> dict[str, bool]:
        return {"pre_start_required": False, "with_topology_alignment": True, "need_reconcile": True}

    def assignments(self, cpus: CPUSet) -> dict[int, CPUSet]:
        return self.idx.assignments(cpus)

