"""Asking the running daemon over ``<root>/status.sock`` (for the CLI).

The status socket is root's (0600): its answers name every user's pods, CPUs, devices and
memory, and only root sees who runs what. A caller who may not connect is told so
(``NotAllowed``), never that the daemon is not running: a refused connect is not an absent
daemon (issue 32 item 9).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DaemonNotRunning", "NotAllowed", "get_status", "get_view", "not_allowed_message"]


class DaemonNotRunning(Exception):
    """No daemon answers on the status socket (the message says what was found)."""


@dataclass(frozen=True)
class SocketFacts:
    """What the caller can see of a socket: its path, owner, group and mode (None: not even that)."""

    path: Path
    owner: str | None = None
    group: str | None = None
    mode: int | None = None

    def __str__(self) -> str:
        if self.mode is None:
            return str(self.path)
        return f"{self.path} is {self.owner}:{self.group} {self.mode:04o}"


def not_allowed_message(command: str, status: SocketFacts, cli: SocketFacts | None, member: bool) -> str:
    """The one line a caller the status socket refuses reads (pure): what it may not do, why, and what
    to run instead. ``cli``: the CLI's socket (None when the daemon serves none); ``member``: the
    caller may connect to it (it is in the socket group), so `hwagent ps` shows its own pods."""
    head = (f"permission denied: you are not allowed to read the daemon's status: {status} "
            "(only root may: it names every user's pods, CPUs, devices and memory); "
            f"run it as root (sudo hwagent {command}), or ask an admin")
    if cli is None:
        return head
    if member:
        return head + "; `hwagent ps` and `hwagent describe NAME` show your own pods"
    group = cli.group or "the daemon's socket group"
    return (head + f"; to see your own pods with `hwagent ps`, ask an admin to add you to group {group} "
            f"(usermod -aG {group} $USER, then log in again)")


class NotAllowed(Exception):
    """The daemon runs, but the caller may not connect to its status socket."""

    def __init__(self, status: SocketFacts, cli: SocketFacts | None, member: bool) -> None:
        super().__init__(not_allowed_message("status", status, cli, member))
        self.status, self.cli, self.member = status, cli, member

    def message(self, command: str) -> str:
        return not_allowed_message(command, self.status, self.cli, self.member)


def _facts(path: Path) -> SocketFacts | None:
    """``path``'s owner, group and mode as the caller sees them; None when it does not exist."""
    import grp
    import pwd
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return SocketFacts(path)

    def name(lookup: Any, ident: int) -> str:
        try:
            return str(lookup(ident)[0])
        except KeyError:
            return str(ident)

    return SocketFacts(path, name(pwd.getpwuid, st.st_uid), name(grp.getgrgid, st.st_gid), stat.S_IMODE(st.st_mode))


def check_access(root_dir: str | Path) -> Path:
    """The status socket of ``root_dir`` when the caller may connect to it; DaemonNotRunning when
    there is none, NotAllowed when it is there and refuses the caller (a root dir the caller cannot
    search counts as that: the daemon's, not an absent one)."""
    from agent.rootpaths import cli_socket, status_socket

    root = Path(root_dir).absolute()
    sock = status_socket(root)
    try:
        present = sock.exists()
        refused = present and not os.access(sock, os.W_OK)  # connect(2) on a unix socket needs write
    except PermissionError:
        present = refused = True
    if not present:
        raise DaemonNotRunning(f"no status socket at {sock}")
    if refused:
        cli_path = cli_socket(root)
        try:
            cli = _facts(cli_path)
            member = cli is not None and os.access(cli_path, os.W_OK)
        except PermissionError:
            cli, member = SocketFacts(cli_path), False
        raise NotAllowed(_facts(sock) or SocketFacts(sock), cli, member)
    return sock


def _call(root_dir: str | Path, method: str, request: Any, timeout_s: float) -> Any:
    import grpc

    from agent.api.status.v1 import api_pb2_grpc as pb_grpc
    from agent.unixsock import dial

    sock = check_access(root_dir)
    with dial(sock, "status") as ch:
        try:
            return getattr(pb_grpc.DaemonStatusStub(ch), method)(request, timeout=timeout_s)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise DaemonNotRunning(f"nothing answers on {sock} ({e.code().name})") from None
            raise


def get_status(root_dir: str | Path, timeout_s: float = 5.0) -> Any:
    from agent.api.status.v1 import api_pb2 as pb

    return _call(root_dir, "GetStatus", pb.GetStatusRequest(), timeout_s)


def get_view(root_dir: str | Path, name: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """The named view from the live daemon; grpc.RpcError FAILED_PRECONDITION when it has no such part."""
    from agent.api.status.v1 import api_pb2 as pb

    return json.loads(_call(root_dir, "GetView", pb.GetViewRequest(name=name), timeout_s).json_document)
