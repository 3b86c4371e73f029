"""Config values that are valid in general but cannot apply on this machine.

``Config.validate`` checks what is wrong anywhere (a negative count, a bad
address); these checks need the machine: a reclaim pool minimum larger than the
CPUs there are, a cgroup root that is not there. They warn rather than fail,
because the daemon still does its other work, and the operator sees why one
setting has no effect in the start-up log.
"""

from __future__ import annotations

from pathlib import Path

from agent.cgroups.config import CGROUPS_SECTION
from agent.cpu.config import CPU_SECTION
from agent.config import Config
from agent.topology.model import Topology

__all__ = ["config_warnings"]


def config_warnings(config: Config, topo: Topology, cgroup_root_exists: bool | None = None) -> list[str]:
    out: list[str] = []
    online = len(topo.online)
    cpu = config[CPU_SECTION]
    if cpu.enabled:
        # "auto" resolves to what the machine has; only a number the operator wrote can be too big
        if cpu.reclaim_min_cpus != "auto" and cpu.reclaim_min_cpus > online:
            out.append(
                f"cpu.reclaim_min_cpus = {cpu.reclaim_min_cpus} is above the {online} online CPUs: "
                "the reclaim pool gets every CPU nothing else holds, never its minimum"
            )
        if cpu.reserved_cpus and cpu.reserved_cpus >= online:
            out.append(f"cpu.reserved_cpus = {cpu.reserved_cpus} leaves no CPU of the {online} online for workloads")
    root = config[CGROUPS_SECTION].root
    exists = Path(root).is_dir() if cgroup_root_exists is None else cgroup_root_exists
    if not exists:
        out.append(f"cgroups.root = {root!r} does not exist: no cgroup is enforced or measured")
    return out
