"""How many connections a user may hold on the sockets users reach (``cli.sock``, ``admission.sock``).

Why: every accepted connection holds a descriptor of the daemon's (three on the admission
socket: the accepted one, the front's dial to the gRPC server and the server's side of it).
Uncapped, one member of the socket group holding ~20,000 idle connections took the daemon to
its descriptor limit: root's `hwagent ps` hung, `/healthz` stopped answering, and the plugin
watcher, the manifest pass and the memory rescan failed with "Too many open files" (issue 32).

The rules, decided by ``refusal`` (pure), applied by ``ConnectionLimiter`` at accept time, before
a byte is read:

- a non-root user holds at most ``per_user`` connections on these sockets together;
- all non-root connections together hold at most ``user_descriptors`` descriptors: the process's
  descriptor limit less a reserve for the daemon's own work (checkpoints, gRPC, the plugin
  watcher, cgroup files, pods' pipes) and for root;
- root (uid 0) is never counted and never refused: its commands must answer while a user holds
  the most the user is allowed.

A refused connection is closed at once (the CLI's socket answers ``429`` first, with this
module's message). The refusals are logged once per user per ``log_interval_s`` with how many
there were, never once per connection: a user's flood must not become a log flood.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.eventlog import get_logger

__all__ = ["ConnectionPolicy", "ConnectionLimiter", "refusal", "user_descriptor_budget"]

log = get_logger("hwagent.workloads")


@dataclass(frozen=True)
class ConnectionPolicy:
    #: connections one non-root user may hold at once, on every user-reachable socket together
    per_user: int
    #: descriptors all non-root users' connections may hold together
    user_descriptors: int


def user_descriptor_budget(nofile_soft: int, reserved: int) -> int:
    """The descriptors users' connections may hold: the limit less the daemon's reserve (pure);
    never negative (a limit below the reserve leaves users none: root only)."""
    return max(0, nofile_soft - reserved)


def refusal(policy: ConnectionPolicy, uid: int, cost: int, held_by_user: int, user_descriptors_held: int) -> str | None:
    """Why a new connection of ``uid`` (holding ``cost`` descriptors) is refused, or None to accept it (pure).
    ``held_by_user``: the user's connections now; ``user_descriptors_held``: every user's descriptors now."""
    if uid == 0:
        return None
    if held_by_user >= policy.per_user:
        return (f"too many connections: uid {uid} holds {held_by_user}, the most a user may hold at once is "
                f"{policy.per_user} ([workloads] max_connections_per_user); close some and try again")
    if user_descriptors_held + cost > policy.user_descriptors:
        return (f"too many connections: users' connections hold {user_descriptors_held} of the "
                f"{policy.user_descriptors} descriptors the daemon lends to users (its descriptor limit less "
                "[workloads] reserved_descriptors); try again later")
    return None


@dataclass
class _Refusals:
    since: float
    count: int = 0


@dataclass
class ConnectionLimiter:
    """The counts behind ``refusal``, shared by every user-reachable socket of the daemon."""

    policy: ConnectionPolicy
    log_interval_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _held: dict[int, int] = field(default_factory=dict)
    _descriptors: int = 0
    _refused: dict[int, _Refusals] = field(default_factory=dict)

    def acquire(self, uid: int, cost: int, where: object = "") -> str | None:
        """Count a new connection of ``uid`` and answer None, or answer why it is refused (and count
        nothing). Every None must be matched by one ``release(uid, cost)``."""
        why = refusal(self.policy, uid, cost, self._held.get(uid, 0), self._descriptors)
        if why is not None:
            self._note_refusal(uid, why, where)
            return why
        if uid != 0:
            self._held[uid] = self._held.get(uid, 0) + 1
            self._descriptors += cost
        return None

    def release(self, uid: int, cost: int) -> None:
        if uid == 0:
            return
        left = self._held.get(uid, 0) - 1
        if left > 0:
            self._held[uid] = left
        else:
            self._held.pop(uid, None)
        self._descriptors = max(0, self._descriptors - cost)

    def held(self, uid: int) -> int:
        return self._held.get(uid, 0)

    @property
    def user_descriptors_held(self) -> int:
        return self._descriptors

    def _note_refusal(self, uid: int, why: str, where: object) -> None:
        now = self.clock()
        seen = self._refused.get(uid)
        if seen is not None and now - seen.since < self.log_interval_s:
            seen.count += 1
            return
        # the first refusal of an interval is logged, with the count of the previous interval's others
        earlier = seen.count if seen is not None else 0
        self._refused[uid] = _Refusals(now)
        if len(self._refused) > 4096:  # users come and go: forget those whose interval is over
            self._refused = {u: r for u, r in self._refused.items() if now - r.since < self.log_interval_s}
        log.warning("connections refused", uid=uid, socket=where, reason=why, refused_in_last_interval=earlier,
                    note=f"logged once per user per {self.log_interval_s:g}s")
