"""Asking the running daemon over ``<root>/status.sock`` (for the CLI).

The status socket is root's (0600): its answers name every user's pods, CPUs, devices and
memory, and only root sees who runs what. A caller who may not connect is told so
(``NotAllowed``), never that the daemon is not running: a refused connect is not an absent
daemon (issue 32 item 9).
"""

from __future__ import annotations

import os

#: typing, pathlib, dataclasses and json are not imported at run time: `hwagent status`, `cpus`, `memory`
#: and `resources` start without them (~10 ms of CPU each, bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = ["DaemonNotRunning", "NotAllowed", "StatusError", "ask_status", "ask_view", "get_status", "get_view",
           "not_allowed_message"]


class DaemonNotRunning(Exception):
    """No daemon answers on the status socket (the message says what was found)."""


class SocketFacts:
    """What the caller can see of a socket: its path, owner, group and mode (None: not even that).
    A plain value class: dataclasses (with inspect behind it) is milliseconds of a command's start-up."""

    __slots__ = ("path", "owner", "group", "mode")

    def __init__(self, path: str | Path, owner: str | None = None, group: str | None = None,
                 mode: int | None = None) -> None:
        self.path, self.owner, self.group, self.mode = path, owner, group, mode

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SocketFacts) and (self.path, self.owner, self.group, self.mode) == (
            other.path, other.owner, other.group, other.mode)

    def __hash__(self) -> int:
        return hash((self.path, self.owner, self.group, self.mode))

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


def _facts(path: str | Path) -> SocketFacts | None:
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


def check_access(root_dir: str | Path) -> str:
    """The status socket of ``root_dir`` when the caller may connect to it; DaemonNotRunning when
    there is none, NotAllowed when it is there and refuses the caller (a root dir the caller cannot
    search counts as that: the daemon's, not an absent one)."""
    from agent.rootpaths import STATUS_SOCKET

    root = os.path.abspath(root_dir)
    sock = os.path.join(root, STATUS_SOCKET)
    try:
        present = os.path.exists(sock)
        refused = present and not os.access(sock, os.W_OK)  # connect(2) on a unix socket needs write
    except PermissionError:
        present = refused = True
    if not present:
        raise DaemonNotRunning(f"no status socket at {sock}")
    if refused:
        raise _refused(root, sock)
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
    import json

    from agent.api.status.v1 import api_pb2 as pb

    return json.loads(_call(root_dir, "GetView", pb.GetViewRequest(name=name), timeout_s).json_document)


# -- the same answers over HTTP/1.1 + JSON (agent.status.httpapi): what the CLI asks ------------------


class StatusError(Exception):
    """The daemon answered with an error: ``code`` (a gRPC status name: INVALID_ARGUMENT for an
    unknown view, FAILED_PRECONDITION for a part that does not run in this daemon) and its message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


def _refused(root: str, sock: str) -> NotAllowed:
    """The caller may not connect to the status socket ``sock`` of ``root``: what to tell it."""
    from agent.rootpaths import CLI_SOCKET

    cli_path = os.path.join(root, CLI_SOCKET)
    try:
        cli = _facts(cli_path)
        member = cli is not None and os.access(cli_path, os.W_OK)
    except PermissionError:
        cli, member = SocketFacts(cli_path), False
    return NotAllowed(_facts(sock) or SocketFacts(sock), cli, member)


def _get(path: str, target: str, timeout_s: float) -> tuple[int, bytes]:
    """One ``GET target`` on the unix socket ``path``, the connection closed after it (HTTP/1.1 framed
    by agent.workloads.wire, the daemon's own rules): (status, body). OSError and WireError as they come."""
    import _socket  # socket.py's C module: socket.py's enums and selectors are milliseconds of start-up

    from agent.workloads import wire

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(path)
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode("ascii"))
        chunks = []
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
    finally:
        sock.close()
    data = b"".join(chunks)
    end = data.find(wire.HEAD_END)
    if end < 0:
        raise ConnectionResetError("the daemon closed the connection before a whole answer")
    lines = wire.split_head(data[:end + 4])
    body = data[end + 4:]
    length = wire.body_length(wire.header_fields(lines[1:]), 1 << 30)
    if len(body) < length:
        raise ConnectionResetError(f"the daemon closed the connection inside a {length}-byte answer")
    return wire.status_of(lines[0]), body[:length]


def _ask(root_dir: str | Path, target: str, timeout_s: float) -> dict[str, Any] | None:
    """``GET target`` on the daemon's root-only status HTTP socket, the JSON answer; None when the
    daemon serves no such socket (one from before it: the caller asks over gRPC). The access rules
    are ``check_access``'s: not running only when nothing is there or nothing answers."""
    from agent.jsonc import loads
    from agent.rootpaths import STATUS_HTTP_SOCKET
    from agent.workloads.wire import WireError

    status_sock = check_access(root_dir)
    root = os.path.dirname(status_sock)
    sock = os.path.join(root, STATUS_HTTP_SOCKET)
    if not os.path.exists(sock):
        return None
    try:
        code, raw = _get(sock, target, timeout_s)
    except (FileNotFoundError, ConnectionRefusedError):
        raise DaemonNotRunning(f"nothing answers on {sock} (UNAVAILABLE)") from None
    except PermissionError:
        raise _refused(root, status_sock) from None
    except TimeoutError:
        raise DaemonNotRunning(f"nothing answers on {sock} (DEADLINE_EXCEEDED)") from None
    except (OSError, WireError) as e:
        raise DaemonNotRunning(f"nothing answers on {sock} (UNAVAILABLE: {e})") from None
    try:
        doc = loads(raw)
    except ValueError:
        raise StatusError("INTERNAL", f"the daemon answered {code} with a body that is not JSON") from None
    if code != 200:
        raise StatusError(str(doc.get("code", "")), str(doc.get("message", "")))
    return doc


def ask_status(root_dir: str | Path, timeout_s: float = 5.0) -> dict[str, Any]:
    """The daemon's status as `hwagent status --format json` prints it (``agent.status.document``)."""
    doc = _ask(root_dir, "/v1/status", timeout_s)
    if doc is not None:
        return doc
    from agent.status.document import status_document

    return status_document(_grpc(get_status, root_dir, timeout_s))


def ask_view(root_dir: str | Path, name: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """The named view (resources, cpus, memory, health); StatusError FAILED_PRECONDITION when the part behind
    it does not run in this daemon, INVALID_ARGUMENT for a name that is no view."""
    from agent.workloads.wire import quote

    doc = _ask(root_dir, f"/v1/views/{quote(name)}", timeout_s)
    return doc if doc is not None else _grpc(get_view, root_dir, timeout_s, name)


def _grpc(fn: Any, root_dir: str | Path, timeout_s: float, *args: str) -> Any:
    """``fn`` (get_status, get_view) over gRPC, its errors as StatusError."""
    import grpc

    try:
        return fn(root_dir, *args, timeout_s=timeout_s)
    except grpc.RpcError as e:
        raise StatusError(e.code().name, e.details() or "") from None
