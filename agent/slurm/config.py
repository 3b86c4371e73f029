"""The [slurm] config section: hwagent beside slurmd (off by default, docs/slurm.md).

Slurm runs as a component on top of standalone mode, not as a mode of its own: the
node's owners (topology, devices and their health, pressure, the CPU and memory
policies) are the same as on a plain box; only the workloads are Slurm's, not
hwagent's. So the component reads Slurm's cgroups and asks Slurm who runs them,
and writes nothing of Slurm's. The other Slurm parts (drain, preemption) add their
keys to this section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.config import SectionKey

__all__ = ["SLURM_SECTION", "SlurmConfig"]

#: a Slurm node name as slurm.conf takes it (and as ``slurm_<node>`` names its cgroup)
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class SlurmConfig:
    #: on: name Slurm's jobs in hwagent's signals (standalone mode only)
    enabled: bool = False
    #: this node's name in Slurm; empty = the short host name (as slurmd takes it)
    node_name: str = ""
    #: directory of Slurm's client programs (squeue, scontrol): absolute, never the caller's PATH
    bin_dir: str = "/usr/bin"
    #: slurmd, run as ``slurmd -G`` (print the node's GRES records and exit) to know which device
    #: file a job's GRES index names; empty: jobs are not joined with the devices they hold
    slurmd_path: str = "/usr/sbin/slurmd"
    #: slurm.conf the client programs read (their SLURM_CONF); empty = Slurm's own default
    slurm_conf: str = ""
    #: where Slurm's cgroup tree hangs below each hierarchy's root ("" = the root itself, where
    #: slurmd's default CgroupMountpoint puts it); a test or a nested setup names its own subtree
    cgroup_parent: str = ""
    #: seconds between walks of Slurm's cgroup tree
    refresh_s: float = 2.0
    #: seconds a job's user and partition, as Slurm answered them, are kept before asking again
    job_info_ttl_s: float = 60.0
    #: seconds one squeue call may take before it is abandoned (the walk goes on with what is cached)
    query_timeout_s: float = 10.0
    #: steps served with their own job/step/user/partition labels, the busiest first; the rest summed
    #: in job="other" (the metric's cardinality stays bounded, as the pod series are)
    max_step_series: int = 200
    # -- the drain (agent.slurm.drainer; docs/slurm.md "Unhealthy devices drain the node")
    #: drain the node through scontrol while a device hwagent offers is unhealthy; resume hwagent's own drain
    drain: bool = True
    #: seconds between reads of the devices' health (values in the daemon, no I/O)
    drain_interval_s: float = 0.5
    #: seconds between asking Slurm for the node's state when nothing changed here
    drain_recheck_s: float = 60.0
    # -- preemptible jobs (agent.slurm.preempt; docs/slurm.md "Preemptible jobs"): none by default
    #: jobs of these partitions / QOS are hwagent's reclaimed class
    preemptible_partitions: tuple[str, ...] = ()
    preemptible_qos: tuple[str, ...] = ()
    #: protected (other) jobs' tasks waiting for a CPU, on average, that count as pressure
    preempt_threshold: float = 0.5
    preempt_calm_fraction: float = 0.5
    preempt_suppress_after_s: float = 5.0
    preempt_requeue_after_s: float = 30.0
    preempt_relax_after_s: float = 30.0
    #: CPUs all preemptible jobs share while suppressed (their CFS quota)
    preempt_quota_cpus: float = 0.1
    #: "requeue" (scontrol requeue) or "cancel" (scancel)
    preempt_action: str = "requeue"
    #: with "cancel": the signal scancel sends (--signal); "" = Slurm's own cancel
    preempt_cancel_signal: str = ""
    preempt_retry_s: float = 60.0

    def validate(self) -> None:
        if self.node_name and not _NODE.match(self.node_name):
            raise ValueError(f"node_name must be letters, digits, '_', '.', '-', not {self.node_name!r}")
        if not self.bin_dir.startswith("/"):
            raise ValueError(f"bin_dir must be absolute, not {self.bin_dir!r}")
        if self.slurmd_path and not self.slurmd_path.startswith("/"):
            raise ValueError(f"slurmd_path must be absolute, not {self.slurmd_path!r}")
        if self.slurm_conf and not self.slurm_conf.startswith("/"):
            raise ValueError(f"slurm_conf must be absolute, not {self.slurm_conf!r}")
        parts = self.cgroup_parent.strip("/").split("/") if self.cgroup_parent.strip("/") else []
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"cgroup_parent must be a plain relative path, not {self.cgroup_parent!r}")
        for key in ("refresh_s", "job_info_ttl_s", "query_timeout_s"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0")
        if self.max_step_series < 1:
            raise ValueError("max_step_series must be >= 1")
        if self.drain_interval_s <= 0 or self.drain_recheck_s < self.drain_interval_s:
            raise ValueError("need 0 < drain_interval_s <= drain_recheck_s")
        from agent.slurm.preempt_policy import policy_from_config

        policy_from_config(self).validate()


#: ``config[SLURM_SECTION]``, the [slurm] section
SLURM_SECTION: SectionKey[SlurmConfig] = SectionKey("slurm", SlurmConfig)
