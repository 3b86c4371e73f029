"""`hwagent explain` of a workload another front names: a Slurm job (or an NRI pod), from the pod directory.

The advisor's records name only the pods hwagent admitted. A Slurm job on this node is
named by the Slurm jobs component (agent.slurm.source: its cgroups walked, its user and
partition asked of Slurm, its class decided once from ``[slurm] preemptible_*``), which
publishes it as the pod directory the daemon serves on ``GET /v1/directory``: the same
door ``ps`` and ``describe`` take. This module finds a job's entries there and says them
(pure); the command asks the daemon.
"""

from __future__ import annotations

#: typing is not imported at run time (the CLI's start-up); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["SLURM_UID_PREFIX", "find_named", "explain_named"]

#: the pod uid the Slurm job directory gives a job (agent.slurm.jobs.job_uid; a unit test keeps them equal)
SLURM_UID_PREFIX = "slurm-job-"

#: what each class means for a Slurm job (docs/slurm.md, "Preemptible jobs")
_SLURM_CLASS = {
    "reclaimed": "preemptible (its partition or QOS is in [slurm] preemptible_partitions / preemptible_qos): "
                 "cpu.idle on v2, low cpu.shares on v1; under pressure its CFS quota is cut, and only after that "
                 "it is handed back to Slurm (requeue or cancel); `hwagent status` shows the preemption's state",
    "shared": "protected: its tasks' wait for a CPU it shares with a preemptible job is the pressure that "
              "suppresses preemptible jobs",
}


def find_named(containers: list[dict[str, Any]], namespace: str | None, name: str) -> list[dict[str, Any]]:
    """The directory's entries of ``name`` (``NAMESPACE/NAME`` names its namespace), its sandbox and
    steps in order (pure). With no namespace given, a Slurm job is found in whatever partition it
    runs (``job_<id>`` is the cluster's one job of that id); anything else in ``default``."""
    if "/" in name:
        namespace, _, name = name.rpartition("/")
    hits = [e for e in containers if e["pod"] == name and
            (e["namespace"] == namespace if namespace is not None else
             e.get("pod_uid", "").startswith(SLURM_UID_PREFIX) or e["namespace"] == "default")]
    return sorted(hits, key=lambda e: (e["namespace"], e["container"] != "", e["container"]))


def _cpus(e: dict[str, Any]) -> str:
    cpus = e.get("cpus")
    return (f"CPUs {cpus} (its cpuset)" if cpus else
            "CPUs: no cpuset of its own (any CPU of the node: cores not confined)")


def explain_named(source: str, entries: list[dict[str, Any]], user_of: Callable[[int | None], str]) -> list[str]:
    """The lines for one job or pod's directory ``entries`` (pure; ``user_of`` names a uid)."""
    head = entries[0]
    uid = head.get("owner_uid")
    owner = "-" if uid is None else f"{user_of(uid)} (uid {uid})"
    qos = head.get("qos") or "-"
    who = f"{head['namespace']}/{head['pod']}"
    if head.get("pod_uid", "").startswith(SLURM_UID_PREFIX):
        job = head["pod_uid"][len(SLURM_UID_PREFIX):]
        out = [f"{who}: Slurm job {job} on this node, named by {source} (Slurm runs it; hwagent names, measures "
               "and classes it)",
               f"user {owner}, partition {head['namespace'] or '-'}, class {qos}: "
               f"{_SLURM_CLASS.get(qos, 'not named by Slurm yet: no class')}",
               "steps:"]
    else:
        out = [f"{who}: named by {source} (not admitted by hwagent)", f"owner {owner}, qos {qos}", "containers:"]
    for e in entries:
        out.append(f"  {e['container'] or '(pod sandbox)'}: {_cpus(e)}, qos {e.get('qos') or '-'}, "
                   f"cgroup {e['cgroup']}")
    return out
