"""From policy state to container cgroups: plan, apply, and drift check/repair.

Which cgroup belongs to which container: an allocation that carries a
``cgroup_path`` (set through ``cpu_policy.bind_cgroup`` by whoever launched
the container) is used as is. Otherwise the pod's cgroup is found in the
kubepods layouts and, when every container of the pod holding a cpuset holds
the *same* cpuset (single-container pods, shared pods in one pool, sidecars
following main), every container cgroup under it gets that cpuset. A pod whose
containers hold different cpusets and carry no paths is "unresolved": it is
counted and left to the kubelet's own reconcile (upstream's only mechanism).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from agent.cgroups.fs import CgroupFS, CgroupVanished
from agent.cgroups.paths import container_dirs, find_pod_cgroup
from agent.cpu.state import PolicyState
from agent.cpuset import CPUSet

__all__ = ["Plan", "plan_cgroups", "Enforcer", "CheckReport"]

log = logging.getLogger("hwagent.cpu")


@dataclass
class Plan:
    targets: dict[str, CPUSet] = field(default_factory=dict)
    #: (pod_uid, container) whose cgroup could not be told apart
    unresolved: list[tuple[str, str]] = field(default_factory=list)


def plan_cgroups(fs: CgroupFS, st: PolicyState) -> Plan:
    plan = Plan()
    for uid, pod in st.entries.items():
        held = [a for a in pod.values() if a.cpuset]
        if not held:
            continue
        explicit = {a.cgroup_path: a.cpuset for a in held if a.cgroup_path}
        plan.targets.update(explicit)
        rest = [a for a in held if not a.cgroup_path]
        if not rest:
            continue
        pod_rel = find_pod_cgroup(fs.cpuset_root, uid)
        if pod_rel is None:
            continue  # not started here yet (or already gone): nothing to enforce
        cpusets = {a.cpuset for a in rest}
        if len(cpusets) != 1:
            plan.unresolved.extend((uid, a.container_name) for a in rest)
            continue
        want = next(iter(cpusets))
        for rel in container_dirs(fs.cpuset_root, pod_rel).values():
            plan.targets.setdefault(rel, want)
    return plan


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

    def __init__(self, fs: CgroupFS) -> None:
        self.fs = fs
        self.enforced: dict[str, CPUSet] = {}

    def sync(self, st: PolicyState, repair: bool = True) -> CheckReport:
        """Compare every planned cgroup with its allocation; apply new ones and
        (when ``repair``) rewrite drifted ones."""
        plan = plan_cgroups(self.fs, st)
        rep = CheckReport(unresolved=len(plan.unresolved))
        to_write: dict[str, CPUSet] = {}
        for rel, want in plan.targets.items():
            try:
                got = self.fs.read_cpus(rel)
            except CgroupVanished:
                rep.vanished.append(rel)
                self.enforced.pop(rel, None)
                continue
            except OSError as e:
                rep.errors.append((rel, str(e)))
                continue
            rep.checked += 1
            if got == want:
                self.enforced[rel] = want
                continue
            if self.enforced.get(rel) == want:
                rep.drift.append((rel, want, got))
                log.warning("cpuset_drift path=%s want=%s found=%s", rel, want, got)
                if repair:
                    to_write[rel] = want
            else:
                to_write[rel] = want
        for rel in list(self.enforced):
            if rel not in plan.targets:
                del self.enforced[rel]
        if to_write:
            res = self.fs.apply_cpusets(to_write)
            rep.vanished.extend(res.vanished)
            rep.errors.extend(res.errors)
            drifted = {d[0] for d in rep.drift}
            for rel in res.written:
                self.enforced[rel] = to_write[rel]
                (rep.repaired if rel in drifted else rep.applied).append(rel)
        return rep
