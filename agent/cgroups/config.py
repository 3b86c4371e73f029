"""The [cgroups] config section: where the cgroup hierarchies are and which subtrees are hwagent's.

Every component that touches cgroups (the CPU policy's cpusets and cpu.idle, the
workload runtime, pressure's run-queue probe and eviction, the kubelet pod
directory) reads its cgroup locations here, so one setting cannot say two
things in two sections. The keys used to live in [daemon], [runtime],
[pressure] and [kubelet]; those spellings still load, each with one warning
naming its new key (``DEPRECATED_KEYS``, applied by agent.config).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from agent.cgroups.detect import DEFAULT_CGROUP_ROOT
from agent.cgroups.paths import DEFAULT_WORKLOAD_ROOTS, CgroupPathError, nested_subtrees, validate_rel_path
from agent.config import SectionKey

__all__ = ["CGROUPS_SECTION", "CgroupsConfig", "derived_reclaimed_subtree", "workload_roots"]


@dataclass(frozen=True)
class CgroupsConfig:
    #: where the host mounts the cgroup hierarchies (v2 itself, or the v1 controller dirs and unified/)
    root: str = DEFAULT_CGROUP_ROOT
    #: cgroup subtrees (relative to a controller root) whose cgroups hwagent may bind,
    #: enforce and kill: its workload runtime's slice and the kubelet's pods
    workload_roots: tuple[str, ...] = DEFAULT_WORKLOAD_ROOTS
    #: subtree (relative to each controller root) that holds every cgroup of hwagent's workload runtime
    runtime_subtree: str = "/hwagent.slice"
    #: subtree of the runtime's reclaimed pods, made idle (cpu.idle = 1) so their CPU time
    #: competes as idle at the cgroup root, not as the runtime subtree's (issue 26); unset:
    #: ``derived_reclaimed_subtree(runtime_subtree)``; "": reclaimed pods in runtime_subtree
    runtime_reclaimed_subtree: str | None = None
    #: hierarchy pods' CPU cgroups are keyed on (run-queue probe, pod directory):
    #: auto = v1 cpu on v1/hybrid hosts, else v2
    hierarchy: Literal["auto", "v2", "cpu", "cpuset", "cpuacct"] = "auto"
    #: the kubelet's --cgroup-root (kubepods lives below it)
    kubelet_cgroup_root: str = "/"
    #: the reclaimed cores' root cgroup, whose cpu.idle the CPU policy keeps ([cpu] sync_cpu_idle);
    #: "" = the besteffort QoS cgroup that exists
    reclaim_cgroup: str = ""

    #: old "section.key" -> key here; agent.config moves such values in with a warning
    DEPRECATED_KEYS: ClassVar[Mapping[str, str]] = {
        "daemon.cgroup_root": "root",
        "daemon.workload_cgroup_roots": "workload_roots",
        "runtime.cgroup_subtree": "runtime_subtree",
        "pressure.cgroup_hierarchy": "hierarchy",
        "kubelet.cgroup_root": "kubelet_cgroup_root",
        "cpu.reclaim_cgroup": "reclaim_cgroup",
    }

    def validate(self) -> None:
        for key in ("root", "kubelet_cgroup_root"):
            value = getattr(self, key)
            if not value.startswith("/"):
                raise ValueError(f"{key}: must be an absolute path, got {value!r}")
        if self.reclaim_cgroup and not self.reclaim_cgroup.startswith("/"):
            raise ValueError("reclaim_cgroup: must start with '/'")
        for root in self.workload_roots:
            try:
                if validate_rel_path(root, None) == "/":
                    raise CgroupPathError("the root cgroup would let eviction kill anything")
            except CgroupPathError as e:
                raise ValueError(f"workload_roots: {root!r}: {e}") from None
        if self.runtime_reclaimed_subtree:
            self._validate_reclaimed(self.runtime_reclaimed_subtree)

    def _validate_reclaimed(self, value: str) -> None:
        key = "runtime_reclaimed_subtree"
        if not value.startswith("/"):
            raise ValueError(f"{key}: must be an absolute path, got {value!r}")
        try:
            rel = validate_rel_path(value, None)
        except CgroupPathError as e:
            raise ValueError(f"{key}: {value!r}: {e}") from None
        if rel == "/":
            raise ValueError(f"{key}: cannot be the cgroup root (it is made idle)")
        if nested_subtrees(rel, self.runtime_subtree):
            raise ValueError(f"{key}: {value!r} overlaps runtime_subtree {self.runtime_subtree!r}: one must not "
                             f"be inside the other (the runtime subtree stays non-idle); give a sibling, e.g. "
                             f"{derived_reclaimed_subtree(self.runtime_subtree)!r}")

    def reclaimed_subtree(self) -> str:
        """Where the runtime puts reclaimed pods: the key, or, unset, the sibling
        ``derived_reclaimed_subtree`` names; "" when they stay in runtime_subtree."""
        value = self.runtime_reclaimed_subtree
        if value is None:
            return derived_reclaimed_subtree(self.runtime_subtree)
        return "/" + value.strip("/") if value else ""


def derived_reclaimed_subtree(runtime_subtree: str) -> str:
    """The reclaimed pods' subtree when none is configured: a sibling of the runtime subtree
    named after it (``/hwagent.slice`` -> ``/hwagent-reclaimed.slice``, ``/a/pods`` ->
    ``/a/pods-reclaimed``). A sibling, not a fixed name: a runtime moved to its own subtree
    (a test's, a delegated service's) takes its reclaimed pods along, and top-level for the
    default, so their idleness reaches the root."""
    head, _, name = ("/" + runtime_subtree.strip("/")).rpartition("/")
    if name.endswith(".slice"):
        return f"{head}/{name[:-len('.slice')]}-reclaimed.slice"
    return f"{head}/{name}-reclaimed"


def workload_roots(config: Any) -> tuple[str, ...]:
    """Every subtree whose cgroups hwagent may bind, enforce and kill: the configured
    roots plus the workload runtime's own subtrees (its pods' and its reclaimed pods'), each a workload root by
    definition (a runtime moved to another subtree must not lose its pods' cpusets
    and eviction). One answer for the CPU policy and the pressure engine."""
    cg = config[CGROUPS_SECTION]
    roots = tuple(cg.workload_roots)
    runtime = config.sections.get("runtime") if hasattr(config, "sections") else None
    if runtime is not None and getattr(runtime, "enabled", False):
        for subtree in ("/" + str(cg.runtime_subtree).strip("/"), cg.reclaimed_subtree()):
            if subtree and subtree not in roots:
                roots += (subtree,)
    return roots


#: ``config[CGROUPS_SECTION]``, the [cgroups] section
CGROUPS_SECTION: SectionKey[CgroupsConfig] = SectionKey("cgroups", CgroupsConfig)
