"""What ``hwagent ps`` shows of the pod directory: the workloads another front names (Slurm's
jobs, the NRI runtime's pods), as far as the caller may see them (pure).

The directory's owner is the front that publishes it (``POD_DIRECTORY``); the admission
socket only shows it. Root sees every entry. Anyone else sees the entries that run as
them (``owner_uid``, set where the front knows the uid for certain: a Slurm job's, as
Slurm says it), and nothing of an entry whose uid is not known: a member of the socket
group learns nothing of other users' work through hwagent (Slurm's own ``squeue``
shows what the site's ``PrivateData`` allows).
"""

from __future__ import annotations

from typing import Any

from agent.contracts.poddirectory import PodDirectory

__all__ = ["visible_entries"]


def visible_entries(directory: PodDirectory | None, uid: int) -> dict[str, Any]:
    """``{"source": ..., "containers": [...]}`` of ``directory`` for a caller of ``uid``."""
    if directory is None:
        return {"source": "", "containers": []}
    rows = [{"namespace": c.namespace, "pod": c.pod, "container": c.container, "qos": c.qos, "cgroup": c.cgroup,
             "owner_uid": c.owner_uid, "pod_uid": c.pod_uid, "cpus": str(c.cpus) if c.cpus else None}
            for c in directory.containers
            if uid == 0 or (c.owner_uid is not None and c.owner_uid == uid)]
    rows.sort(key=lambda r: (r["namespace"], r["pod"], r["container"]))
    return {"source": directory.source if rows or uid == 0 else "", "containers": rows}
