"""What one user may hold: pods and log bytes (``[workloads] max_pods_per_user``,
``max_log_bytes_per_user``), the refusals as pure functions.

Slurm's ``MaxSubmitJobs``/``MaxJobs`` per user are the model: the daemon is root's and
serves every member of the socket group, so without a cap one member fills the node
(issue 32: 963 pods in 180 s, daemon RSS 80 -> 228 MB). A pod counts from its admission
until it is removed, whatever its phase: an ended pod keeps a record in the daemon's memory
and its logs on disk, so counting only live pods would let a user fill both with ended
ones (the retention rule, ``agent.workloads.retention``, removes the oldest ended ones
on its own). Root's own requests are not capped (root can change the limit anyway, and
static manifests are root's); a pod root runs as a user still counts toward that user's
number. The refusal is RESOURCE_EXHAUSTED, and its message names the limit and what to do.
"""

from __future__ import annotations

import pwd
from dataclasses import dataclass

from agent.quantity import format_bytes

__all__ = ["UserLimits", "user_name", "pod_cap_refusal", "log_cap_refusal", "HINT"]

#: what a refused user can do about it
HINT = "remove ended pods with hwagent rm (hwagent ps lists them)"


@dataclass(frozen=True)
class UserLimits:
    #: 0: no cap
    max_pods_per_user: int = 0
    max_log_bytes_per_user: int = 0


def user_name(uid: int) -> str:
    """The user's login name, or ``uid N`` when it has no passwd entry."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def pod_cap_refusal(user: str, pods: int, cap: int) -> str | None:
    """Why one more pod of a user holding ``pods`` is refused, or None (``cap`` 0: no cap)."""
    if not cap or pods < cap:
        return None
    return f"user {user} has {pods} pods, the limit [workloads] max_pods_per_user is {cap}; {HINT}"


def log_cap_refusal(user: str, held: int, cap: int) -> str | None:
    """Why a new pod of a user whose pods' logs hold ``held`` bytes is refused, or None."""
    if not cap or held < cap:
        return None
    return (f"user {user}'s pods hold {held} bytes of logs, the limit [workloads] "
            f"max_log_bytes_per_user is {cap} ({format_bytes(cap)}); {HINT}")
