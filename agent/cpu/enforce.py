"""From policy state to container cgroups: plan, apply, and drift check/repair.

Which cgroup belongs to which container: an allocation that carries a
``cgroup_path`` (set through ``cpu_policy.bind_cgroup`` by whoever launched
the container) is used as is. Otherwise the pod's cgroup is found in the
kubepods layouts and, when every container of the pod holding a cpuset holds
the *same* cpuset (single-container pods, shared pods in one pool, sidecars
following main), every container cgroup under it gets that cpuset. A pod whose
containers hold different cpusets and carry no paths is "unresolved": it is
counted and left to the kubelet's own reconcile (upstream's only mechanism).

Containers with ``numa_binding`` also get ``cpuset.mems`` = the NUMA nodes of
their cpuset (binding CPUs without memory is half a binding), unless the memory
manager placed the container's memory: then its memory affinity (``mems_of``,
the nodes of its memory blocks, which the topology manager aligned with the
CPUs), for any container it placed, NUMA-bound or with hugepages.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from agent.cgroups.fs import CgroupFS, CgroupVanished
from agent.cgroups.paths import CgroupPathError, PodCgroups, container_dirs, pod_uids_named
from agent.contracts.cpu import AllocationInfo
from agent.contracts.placement import memory_nodes
from agent.cpu.state import PolicyState
from agent.cpuset import CPUSet
from agent.eventlog import get_logger

__all__ = ["Plan", "plan_cgroups", "Enforcer", "CheckReport", "MemsOf"]

#: (pod uid, container) -> the memory manager's nodes for it, None when it placed nothing
MemsOf = Callable[[str, str], "CPUSet | None"]

log = get_logger("hwagent.cpu")


@dataclass
class Plan:
    targets: dict[str, CPUSet] = field(default_factory=dict)
    #: cpuset.mems for NUMA-bound containers
    mems: dict[str, CPUSet] = field(default_factory=dict)
    #: (pod_uid, container) whose cgroup could not be told apart
    unresolved: list[tuple[str, str]] = field(default_factory=list)


def plan_cgroups(fs: CgroupFS, st: PolicyState, numa_of: Mapping[int, int] | None = None,
                 followers: Mapping[str, CPUSet] | None = None, mems_of: MemsOf | None = None,
                 only: Collection[str] | None = None, pods: PodCgroups | None = None) -> Plan:
    """``followers``: cgroups of containers the policy holds nothing of (init
    containers), each with the CPUs it follows (the shared pool). ``only``: plan these
    pods (uids) and no other (a pass after a change); None: every pod."""
    plan = Plan(targets=dict(followers or {}))
    if pods is None:
        pods = PodCgroups(fs.cpuset_root)  # the kubepods layouts listed once for the pass, not stat'ed per pod
    chosen = st.stored.items() if only is None else ((u, st.stored[u]) for u in sorted(only) if u in st.stored)
    for uid, stored in chosen:
        found = _found_first(pods, uid, stored)
        if found is None:
            continue  # nothing bound and no cgroup (an NRI node's pods): not resolved for nothing
        pod = st.pod(uid)
        held = [a for a in pod.values() if a.cpuset]
        if not held:
            continue
        _plan_bound(plan, uid, held, numa_of, mems_of)
        rest = [a for a in held if not a.cgroup_path]
        if not rest:
            continue
        try:
            pod_rel = found or pods.find(uid)
        except CgroupPathError:  # a UID that cannot name a cgroup has none to enforce
            plan.unresolved.extend((uid, a.container_name) for a in rest)
            continue
        if pod_rel is None:
            continue  # not started here yet (or already gone): nothing to enforce
        cpusets = {a.cpuset for a in rest}
        if len(cpusets) != 1:
            plan.unresolved.extend((uid, a.container_name) for a in rest)
            continue
        want = next(iter(cpusets))
        bound = numa_of is not None and any(a.numa_binding for a in rest)
        placed_sets = {mems_of(uid, a.container_name) for a in rest} if mems_of is not None else {None}
        placed = next(iter(placed_sets)) if len(placed_sets) == 1 else None
        for rel in container_dirs(fs.cpuset_root, pod_rel).values():
            if rel not in plan.targets:
                plan.targets[rel] = want
                if placed:
                    plan.mems[rel] = placed
                elif bound:
                    plan.mems[rel] = memory_nodes(want, numa_of)  # type: ignore[arg-type]
    return plan


def _plan_bound(plan: Plan, uid: str, held: list[AllocationInfo], numa_of: Mapping[int, int] | None,
                mems_of: MemsOf | None) -> None:
    """The targets of a pod's containers bound to a cgroup path (their launcher said where)."""
    for a in held:
        if a.cgroup_path:
            plan.targets[a.cgroup_path] = a.cpuset
            placed = mems_of(uid, a.container_name) if mems_of is not None else None
            if placed:
                plan.mems[a.cgroup_path] = placed
            elif a.numa_binding and numa_of is not None:
                plan.mems[a.cgroup_path] = memory_nodes(a.cpuset, numa_of)


def _found_first(pods: PodCgroups, uid: str, stored: Mapping[str, AllocationInfo]) -> str | None:
    """The pod's cgroup when none of its containers is bound to a path (paths are stored as
    written: no re-size changes them); None when it has no cgroup either, so a pass has
    nothing to do for it and need not resolve its entries; "" when it must be looked at
    whole (a bound container, or a uid the layouts refuse, which is refused there)."""
    if any(a.cgroup_path for a in stored.values()):
        return ""
    try:
        return pods.find(uid)
    except CgroupPathError:
        return ""


def _changed_names(before: Mapping[str, frozenset[str]], now: Mapping[str, frozenset[str]]) -> set[str]:
    """Directory names added to or gone from any layout's parent between two listings."""
    out: set[str] = set()
    for parent in before.keys() | now.keys():
        a, b = before.get(parent, frozenset()), now.get(parent, frozenset())
        if a is not b and a != b:
            out |= a ^ b
    return out


@dataclass
class CheckReport:
    checked: int = 0
    applied: list[str] = field(default_factory=list)
    drift: list[tuple[str, CPUSet, CPUSet]] = field(default_factory=list)  # (path, want, found)
    repaired: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    unresolved: int = 0


class Enforcer:
    """Remembers what it last made true, so a later difference is *drift*
    (someone else wrote the cgroup) rather than a first application."""

    def __init__(self, fs: CgroupFS, numa_of: Mapping[int, int] | None = None, mems_of: MemsOf | None = None) -> None:
        self.fs = fs
        self.numa_of = numa_of
        self.mems_of = mems_of
        self.enforced: dict[tuple[str, str], CPUSet] = {}
        #: the pod cgroup layouts as the last pass listed them (a pass after a change looks
        #: again at the pods whose cgroup appeared or went since)
        self._listing: dict[str, frozenset[str]] | None = None

    def sync(self, st: PolicyState, repair: bool = True, followers: Mapping[str, CPUSet] | None = None,
             fresh: frozenset[str] = frozenset(), only: Collection[str] | None = None) -> CheckReport:
        """Compare every planned cgroup with its allocation; apply new values and
        (when ``repair``) rewrite drifted ones. cpus first, then mems.

        ``fresh``: cgroups just (re)created by their launcher. What was made true in
        an earlier cgroup of the same path says nothing of this one: its first write
        is an application, never drift (which ``repair_drift = false`` would leave)."""
        for rel in fresh:
            self.enforced.pop(("cpus", rel), None)
            self.enforced.pop(("mems", rel), None)
        pods = PodCgroups(self.fs.cpuset_root)
        listing = pods.listing()
        if only is not None:
            if self._listing is None:
                only = None  # no earlier listing to tell which pods' cgroups appeared: all of them
            else:
                only = set(only) | pod_uids_named(_changed_names(self._listing, listing))
        self._listing = listing
        plan = plan_cgroups(self.fs, st, self.numa_of, followers, self.mems_of, only=only, pods=pods)
        rep = CheckReport(unresolved=len(plan.unresolved))
        for key, targets in (("cpus", plan.targets), ("mems", plan.mems)):
            self._sync_key(key, targets, rep, repair)
        if only is not None:
            return rep  # what the other pods' cgroups were made is kept until a full pass
        live = {("cpus", r) for r in plan.targets} | {("mems", r) for r in plan.mems}
        for k in list(self.enforced):
            if k not in live:
                del self.enforced[k]
        return rep

    def _sync_key(self, key: str, targets: dict[str, CPUSet], rep: CheckReport, repair: bool) -> None:
        to_write: dict[str, CPUSet] = {}
        drifted: set[str] = set()
        for rel, want in targets.items():
            if rel in rep.vanished:
                continue
            try:
                got = self.fs.read_cpus(rel) if key == "cpus" else self.fs.read_mems(rel)
            except CgroupVanished:
                rep.vanished.append(rel)
                self.enforced.pop((key, rel), None)
                continue
            except OSError as e:
                rep.errors.append((rel, str(e)))
                continue
            if key == "cpus":
                rep.checked += 1
            if got == want:
                self.enforced[(key, rel)] = want
                continue
            if self.enforced.get((key, rel)) == want:
                rep.drift.append((rel, want, got))
                drifted.add(rel)
                log.warning("cpuset drift", key=key, path=rel, want=want, found=got)
                if repair:
                    to_write[rel] = want
            else:
                to_write[rel] = want
        if not to_write:
            return
        res = self.fs.apply_cpusets(to_write) if key == "cpus" else self.fs.apply_mems(to_write)
        rep.vanished.extend(r for r in res.vanished if r not in rep.vanished)
        rep.errors.extend(res.errors)
        for rel in res.written:
            self.enforced[(key, rel)] = to_write[rel]
            out = rep.repaired if rel in drifted else rep.applied
            if rel not in out:
                out.append(rel)
