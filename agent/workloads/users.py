"""Who may ask for what on the admission API: the caller, the user a pod runs as, whose pods it sees.

The daemon learns the caller from the kernel (SO_PEERCRED and SO_PEERGROUPS of
its connection, ``agent.workloads.peerfront``), never from the request, so
nothing a client sends can make it someone else. The rules are pure functions
of that caller and the pod:

- a pod belongs to the user it runs as (``PodSpec.owner_uid``; root without
  ``runAsUser``);
- root may run a pod as anyone (``runAsUser``, ``runAsGroup``,
  ``supplementalGroups``; a user's supplementary groups are added from the group
  database, as login does);
- a non-root caller's pod runs as that caller, with its primary group and the
  supplementary groups it holds now; it may name itself, its own groups and
  nothing else (PERMISSION_DENIED, and nothing is admitted);
- a pod starts with the resource limits of the process that submitted it (read from
  /proc at admission, as Slurm's PropagateResourceLimits=ALL; ``agent.runtime.rlimits``); a
  non-root caller whose process cannot be read is refused (FAILED_PRECONDITION), root's
  falls back to the system's defaults;
- a non-root caller sees, stops, removes and watches its own pods only; another
  user's pod is NOT_FOUND, the same answer as a pod that does not exist, so a
  caller learns nothing of the others' pods (a name taken by another user's pod
  is still refused at admission: names are unique per node).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.contracts.pods import PodSpec, RLimit, RunAs
from agent.runtime.rlimits import RLimitsUnreadable, caller_limits
from agent.workloads.errors import AdmissionError

__all__ = ["Caller", "ROOT", "UserDB", "SYSTEM_USERS", "resolve_run_as", "submitter_limits", "may_see", "not_found"]


@dataclass(frozen=True)
class Caller:
    """The process at the other end of an admission connection, as the kernel saw it at connect."""

    uid: int
    gid: int
    #: supplementary groups (SO_PEERGROUPS; after login they hold the primary group too)
    groups: tuple[int, ...] = ()
    pid: int = 0

    @property
    def root(self) -> bool:
        return self.uid == 0


#: the daemon's own requests (static manifests, restore) and in-process callers
ROOT = Caller(0, 0)


@dataclass(frozen=True)
class UserDB:
    """The two lookups a root caller's ``runAsUser`` needs (the passwd and group
    databases); a value so tests can give their own."""

    #: uid -> (name, primary gid), None when the uid has no passwd entry
    user: Callable[[int], tuple[str, int] | None]
    #: (name, primary gid) -> every group the user is in, the primary one included
    groups: Callable[[str, int], Sequence[int]]


def _passwd(uid: int) -> tuple[str, int] | None:
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return None
    return pw.pw_name, pw.pw_gid


def _grouplist(name: str, gid: int) -> Sequence[int]:
    try:
        return os.getgrouplist(name, gid)
    except OSError:
        return [gid]


SYSTEM_USERS = UserDB(_passwd, _grouplist)


def _denied(message: str) -> AdmissionError:
    return AdmissionError("PERMISSION_DENIED", message, reason="user")


def resolve_run_as(caller: Caller, asked: RunAs | None, users: UserDB = SYSTEM_USERS) -> RunAs | None:
    """The identity a pod asked for (``spec.securityContext``) as it will run, for this
    caller; PERMISSION_DENIED when the caller may not ask it. None: root (root asked
    for no user)."""
    if caller.root:
        return _as_root_chose(asked, users)
    uid = caller.uid if asked is None or asked.uid is None else asked.uid
    if uid != caller.uid:
        raise _denied(f"uid {caller.uid} may run pods only as itself, not as uid {uid} "
                      "(only root chooses another user: sudo hwagent launch --user ...)")
    mine = (caller.gid, *caller.groups)
    gid = caller.gid if asked is None or asked.gid is None else asked.gid
    if gid not in mine:
        raise _denied(f"uid {caller.uid} is not in group {gid}; its groups: {', '.join(map(str, mine))}")
    extra = tuple(g for g in (asked.groups if asked is not None else ()) if g not in mine)
    if extra:
        raise _denied(f"uid {caller.uid} is not in supplementary group(s) {', '.join(map(str, extra))}")
    groups = asked.groups if asked is not None and asked.groups else caller.groups
    return RunAs(uid, gid, tuple(dict.fromkeys(groups)))


def _as_root_chose(asked: RunAs | None, users: UserDB) -> RunAs | None:
    if asked is None or asked.uid is None:
        if asked is not None and (asked.gid is not None or asked.groups):
            raise AdmissionError("INVALID_ARGUMENT", "spec.securityContext: runAsGroup and supplementalGroups "
                                 "need runAsUser (without it the pod runs as root)", reason="user")
        return None
    entry = users.user(asked.uid)
    gid = asked.gid
    if gid is None:
        if entry is None:
            raise AdmissionError(
                "INVALID_ARGUMENT", f"uid {asked.uid} has no passwd entry, so it has no primary group: "
                f"give one (--user {asked.uid}:GID, or spec.securityContext.runAsGroup)", reason="user")
        gid = entry[1]
    groups: list[int] = list(asked.groups)
    if entry is not None:
        groups += users.groups(entry[0], entry[1])
    return RunAs(asked.uid, gid, tuple(dict.fromkeys(groups)))


def submitter_limits(caller: Caller, read: Callable[[int, int], tuple[RLimit, ...]] = caller_limits
                     ) -> tuple[RLimit, ...]:
    """The limits the caller's pod starts with: those of the caller's process (``read(pid, uid)``,
    at request time, while its connection is open). A non-root caller whose process cannot be
    read (it exited, its pid was reused) is refused: falling back to anything else could give
    her limits she does not have. Root's falls back to () (the system's defaults at start)."""
    try:
        return read(caller.pid, caller.uid)
    except RLimitsUnreadable as e:
        if caller.root:
            return ()
        raise AdmissionError("FAILED_PRECONDITION", f"cannot take your resource limits for the pod: {e} "
                             "(the pod starts with the limits of the process that submits it; "
                             "run the command again and keep it running until it answers)", reason="user") from None


def may_see(caller: Caller, spec: PodSpec) -> bool:
    """Whether ``caller`` may see and act on the pod: root, or the user the pod runs as."""
    return caller.root or spec.owner_uid == caller.uid


def not_found(namespace: str, name: str) -> AdmissionError:
    """Admission's own answer for a pod that does not exist (``Workloads.find``), so
    another user's pod reads exactly like a missing one."""
    return AdmissionError("NOT_FOUND", f"no pod {namespace}/{name}", reason="not_found")
