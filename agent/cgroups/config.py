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
from agent.cgroups.paths import DEFAULT_WORKLOAD_ROOTS, CgroupPathError, validate_rel_path
from agent.config import SectionKey

__all__ = ["CGROUPS_SECTION", "CgroupsConfig", "workload_roots"]


@dataclass(frozen=True)
class CgroupsConfig:
    #: where the host mounts the cgroup hierarchies (v2 itself, or the v1 controller dirs and unified/)
    root: str = DEFAULT_CGROUP_ROOT
    #: cgroup subtrees (relative to a controller root) whose cgroups hwagent may bind,
    #: enforce and kill: its workload runtime's slice and the kubelet's pods
    workload_roots: tuple[str, ...] = DEFAULT_WORKLOAD_ROOTS
    #: subtree (relative to each controller root) that holds every cgroup of hwagent's workload runtime
    runtime_subtree: str = "/hwagent.slice"
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


def workload_roots(config: Any) -> tuple[str, ...]:
    """Every subtree whose cgroups hwagent may bind, enforce and kill: the configured
    roots plus the workload runtime's own subtree, which is a workload root by
    definition (a runtime moved to another subtree must not lose its pods' cpusets
    and eviction). One answer for the CPU policy and the pressure engine."""
    cg = config[CGROUPS_SECTION]
    roots = tuple(cg.workload_roots)
    runtime = config.sections.get("runtime") if hasattr(config, "sections") else None
    if runtime is not None and getattr(runtime, "enabled", False):
        subtree = "/" + str(cg.runtime_subtree).strip("/")
        if subtree not in roots:
            roots += (subtree,)
    return roots


#: ``config[CGROUPS_SECTION]``, the [cgroups] section
CGROUPS_SECTION: SectionKey[CgroupsConfig] = SectionKey("cgroups", CgroupsConfig)
