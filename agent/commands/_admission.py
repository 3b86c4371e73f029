"""The CLI side of the admission API (for the workload commands): find the daemon's socket, call, turn errors into one line.

Commands share this so each of them stays a thin argparse module. They speak
the daemon's CLI API (HTTP/1.1 and JSON on ``<root>/cli.sock``,
``agent.workloads.cliapi``) over a bare unix socket, framed by
``agent.workloads.wire`` (the server's own rules): no grpc, no protobuf, no
config loader and no ``http.client`` (with the ``email`` and ``ssl`` modules it
pulls in, 12.5 ms of a 17 ms import bill) on this path, which was most of a
command's CPU (bench/cli.py, docs/performance.md). The root dir is
``--root-dir``, else ``[daemon] root_dir`` of ``--config``, else the one the
running daemon recorded (agent.commands._config).
"""

from __future__ import annotations

import os
import time

# the C module under socket.py: socket.py turns its constants into IntEnums (and imports selectors),
# ~2 ms of every command's start-up (bench/cli.py); a unix stream socket needs none of it
import _socket as socket
from agent.cli import CommandError
from agent.commands._exitcodes import EXIT_EXISTS, EXIT_NO_DAEMON, EXIT_NOT_FOUND, EXIT_REFUSED
from agent.commands._flags import Flag, add
from agent.commands._jsonc import dumps as json_dumps
from agent.commands._jsonc import loads as json_loads
from agent.workloads import wire

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

    from agent.rootpaths import StrPath

__all__ = ["add_common", "call", "Session", "error_for", "socket_path", "pod_path", "format_pod_line",
           "EXIT_REFUSED"]

CALL_TIMEOUT_S = 120.0


#: the flags every command that talks to the daemon takes (agent.commands._flags)
COMMON_FLAGS = (
    Flag("--config", metavar="FILE", help="TOML config file (default: embedded defaults)"),
    Flag("--root-dir", metavar="DIR", help="the daemon's root dir (overrides the config)"),
)


def add_common(p: argparse.ArgumentParser) -> None:
    add(p, COMMON_FLAGS)


def socket_path(args: argparse.Namespace) -> str:
    """The daemon's CLI socket (agent.rootpaths.cli_socket), as a string: no pathlib on the hot path."""
    from agent.commands._config import daemon_root_dir
    from agent.rootpaths import CLI_SOCKET

    return os.path.join(daemon_root_dir(args), CLI_SOCKET)


def pod_path(namespace: str, name: str, action: str = "") -> str:
    """``/v1/pods/NS/NAME[/action]``, each part quoted; a ``name`` written ``NAMESPACE/NAME`` (as
    ``ps -q`` prints it outside the default namespace, and ``logs`` takes it) names its namespace."""
    if "/" in name:
        namespace, _, name = name.rpartition("/")
    return f"/v1/pods/{wire.quote(namespace)}/{wire.quote(name)}" + (f"/{action}" if action else "")


def daemon_down(path: StrPath) -> CommandError:
    return CommandError(f"the daemon is not running (no answer on {path}); start it with `hwagent run` "
                        "(or `systemctl start hwagent`)", EXIT_NO_DAEMON)


def error_for(code: str, details: str, path: StrPath, name: str | None = None) -> CommandError:
    """An API error code (the gRPC status name the daemon answers with) as one line that says what
    happened and what to type next, and its exit status (agent.commands._exitcodes); the code
    itself is never shown."""
    details = details or code.lower().replace("_", " ")
    if code == "UNAVAILABLE":
        low = details.lower()
        if "connect" in low or "refused" in low or "no such file" in low:
            return daemon_down(path)
        return CommandError(f"the daemon stopped answering ({details}); check it with `hwagent status`",
                            EXIT_NO_DAEMON)
    if code == "NOT_FOUND":
        return CommandError(f"{details}; `hwagent ps` lists the pods", EXIT_NOT_FOUND)
    if code == "ALREADY_EXISTS":
        rm = f"`hwagent rm {name}`" if name else "`hwagent rm NAME`"
        return CommandError(f"{details}; remove it first with {rm}, or choose another name", EXIT_EXISTS)
    if code == "INVALID_ARGUMENT" and "unknown field" in details:
        return CommandError(f"{details}; to admit it anyway, with unknown fields ignored and warned about, add "
                            "--ignore-unknown-fields", EXIT_REFUSED)
    if code == "DEADLINE_EXCEEDED":
        return CommandError(f"the daemon did not answer in time ({details}); it may be busy: "
                            "check it with `hwagent status`", EXIT_REFUSED)
    return CommandError(details, EXIT_REFUSED)


#: the largest answer the CLI reads (a page of 1,000 pods in the summary form is well below)
MAX_ANSWER = 256 * 1024 * 1024


def permission_denied(path: StrPath) -> CommandError:
    """EACCES on connect: the socket is the daemon's group's (``[workloads] socket_group``), and the caller is
    not in it; say who owns it and what to ask for."""
    import grp
    import pwd
    import stat

    try:
        st = os.stat(path)
    except OSError:
        return CommandError(f"permission denied: {path}; ask an admin for access", EXIT_NO_DAEMON)

    def name(lookup: Any, ident: int) -> str:
        try:
            return str(lookup(ident)[0])
        except KeyError:
            return str(ident)

    group = name(grp.getgrgid, st.st_gid)
    return CommandError(f"permission denied: {path} is {name(pwd.getpwuid, st.st_uid)}:{group} "
                        f"{stat.S_IMODE(st.st_mode):04o}; ask an admin to add you to group {group} "
                        f"(usermod -aG {group} $USER, then log in again)", EXIT_NO_DAEMON)


class _Connection:
    """HTTP/1.1 over the daemon's unix socket, one request at a time, kept open between them."""

    def __init__(self, path: StrPath) -> None:
        self.path = path
        self.sock: socket.socket | None = None

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def exchange(self, method: str, target: str, body: bytes, timeout: float,
                 idle: Callable[[], None] | None = None, idle_s: float = 0.2) -> tuple[int, bytes]:
        """Send one request, answer (status, body). OSError and WireError as they come. ``idle``:
        called every ``idle_s`` while no answer has come (a long poll's wait: ``launch --wait``
        streams the job's log from it, on this thread; what it raises comes out of here).

        A kept-alive connection the daemon closed before answering (it closes one left idle past
        ``[workloads] connection_idle_seconds``, say while `ps | less` waits on the reader) is
        opened again and the request sent once more: the daemon never read it, as HTTP clients
        assume of a keep-alive connection closed without a word."""
        reused = self.sock is not None
        try:
            return self._exchange(method, target, body, timeout, idle, idle_s)
        except _ClosedUnanswered:
            self.close()
            if not reused:
                raise
        return self._exchange(method, target, body, timeout, idle, idle_s)

    def _exchange(self, method: str, target: str, body: bytes, timeout: float,
                  idle: Callable[[], None] | None, idle_s: float) -> tuple[int, bytes]:
        if self.sock is None:
            self.sock = _connect(str(self.path), timeout)
        sock = self.sock
        sock.settimeout(timeout)
        try:
            sock.sendall(wire.request_head(method, target, len(body)) + body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # it may have answered before it closed (a refusal, 429): read on; nothing there says it did not
        buf = b""
        if idle is not None:
            buf = self._first(sock, timeout, idle, idle_s)
        while (end := buf.find(wire.HEAD_END)) < 0:
            if len(buf) > wire.MAX_HEAD:
                raise wire.WireError(502, f"the answer's head is larger than {wire.MAX_HEAD} bytes")
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                if not buf:
                    raise _ClosedUnanswered("the daemon closed the connection before it answered")
                raise ConnectionResetError("the daemon closed the connection inside its answer's head")
            buf += chunk
        lines = wire.split_head(buf[:end + 4])
        status = wire.status_of(lines[0])
        headers = wire.header_fields(lines[1:])
        length = wire.body_length(headers, MAX_ANSWER)
        parts, have = [buf[end + 4:]], len(buf) - end - 4
        while have < length:
            chunk = sock.recv(min(1 << 20, length - have))
            if not chunk:
                raise ConnectionResetError(f"the daemon closed the connection inside a {length}-byte answer")
            parts.append(chunk)
            have += len(chunk)
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, b"".join(parts)[:length]

    @staticmethod
    def _first(sock: socket.socket, timeout: float, idle: Callable[[], None], idle_s: float) -> bytes:
        """The answer's first bytes, ``idle`` called every ``idle_s`` until they come; TimeoutError
        after ``timeout`` seconds, as a plain read."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("timed out")
                sock.settimeout(min(idle_s, left))
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    idle()
                    continue
                if not chunk:
                    raise _ClosedUnanswered("the daemon closed the connection before it answered")
                return chunk
        finally:
            sock.settimeout(timeout)


class _ClosedUnanswered(ConnectionResetError):
    """The daemon closed the connection before a byte of its answer: it did not take the request."""


def _connect(path: str, timeout: float) -> socket.socket:
    """A connection to the daemon's socket. EAGAIN (its listen backlog full for a moment: another
    user floods the socket, and the daemon accepts and refuses what is over that user's cap) is
    tried again until ``timeout``, with a short back-off; TimeoutError after."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(path)
            return sock
        except BlockingIOError:
            sock.close()
            if time.monotonic() + delay > deadline:
                raise TimeoutError(f"{path}: the daemon's listen backlog stayed full for {timeout:g} s") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        except BaseException:
            sock.close()
            raise


class Session:
    """One connection to the daemon's CLI API for several calls (``launch --wait`` polls on it);
    ``session.request(...)`` answers the JSON body, with errors turned into ``error_for``'s."""

    def __init__(self, args: argparse.Namespace, name: str | None = None) -> None:
        self.path = socket_path(args)
        self.name = name
        self._conn: _Connection | None = None

    def __enter__(self) -> Session:
        if not os.path.exists(self.path):
            raise daemon_down(self.path)
        self._conn = _Connection(self.path)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            self._conn.close()

    def reset(self) -> None:
        """Drop the connection (a request cut short leaves its answer unread); the next request opens a new one."""
        if self._conn is not None:
            self._conn.close()

    def request(self, method: str, path: str, body: bytes | dict[str, Any] | None = None,
                query: dict[str, str] | None = None, timeout: float = CALL_TIMEOUT_S,
                idle: Callable[[], None] | None = None, idle_s: float = 0.2) -> dict[str, Any]:
        """``idle``, ``idle_s``: as ``_Connection.exchange`` takes them."""
        status, raw = self._exchange(method, path, body, query, timeout, idle, idle_s)
        answer = self._decode(status, raw)
        if status != 200:
            raise error_for(str(answer.get("code", "")), str(answer.get("message", "")), self.path, self.name)
        return answer

    def request_bytes(self, method: str, path: str, query: dict[str, str] | None = None,
                      timeout: float = CALL_TIMEOUT_S) -> bytes:
        """As ``request``, but a 200 answer's body as it came, not decoded (``ps --format json`` writes
        the daemon's encoding through); an error is decoded and raised as ``request`` raises it."""
        status, raw = self._exchange(method, path, None, query, timeout, None, 0.2)
        if status == 200:
            return raw
        answer = self._decode(status, raw)
        raise error_for(str(answer.get("code", "")), str(answer.get("message", "")), self.path, self.name)

    def _decode(self, status: int, raw: bytes) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = json_loads(raw)
        except ValueError:
            raise CommandError(f"the daemon answered {status} with a body that is not JSON; "
                               "check it with `hwagent status`", EXIT_NO_DAEMON) from None
        return answer

    def _exchange(self, method: str, path: str, body: bytes | dict[str, Any] | None, query: dict[str, str] | None,
                  timeout: float, idle: Callable[[], None] | None, idle_s: float) -> tuple[int, bytes]:
        """One request on the session's connection: (status, body); transport errors as CommandError."""
        assert self._conn is not None, "use the Session as a context manager"
        data = json_dumps(body).encode() if isinstance(body, dict) else (body or b"")
        target = path + ("?" + wire.urlencode(query) if query else "")
        try:
            return self._conn.exchange(method, target, data, timeout, idle, idle_s)
        except TimeoutError:
            self._conn.close()
            raise error_for("DEADLINE_EXCEEDED", f"no answer in {timeout:g} s", self.path, self.name) from None
        except (FileNotFoundError, ConnectionRefusedError):
            raise daemon_down(self.path) from None
        except PermissionError:
            raise permission_denied(self.path) from None
        except ConnectionResetError as e:  # connected, then hung up on: a running daemon, not an absent one
            self._conn.close()
            raise CommandError(f"the daemon closed the connection without an answer ({e}); check it with "
                               "`hwagent status`", EXIT_NO_DAEMON) from None
        except (OSError, wire.WireError) as e:
            self._conn.close()
            raise error_for("UNAVAILABLE", f"{type(e).__name__}: {e}", self.path, self.name) from None


def call(args: argparse.Namespace, method: str, path: str, body: bytes | dict[str, Any] | None = None,
         *, query: dict[str, str] | None = None, name: str | None = None,
         timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
    """One request to the daemon; errors become CommandError (``error_for``).
    ``name``: the pod the call is about, for the next command a refusal suggests."""
    with Session(args, name) as session:
        return session.request(method, path, body, query, timeout)


def _nodes(ids: Any) -> str:
    from agent.cpuset import CPUSet

    return str(CPUSet(int(i) for i in ids)) or "-"


def container_line(c: dict[str, Any]) -> str:
    """A container of the JSON pod (agent.workloads.podjson) as one line."""
    aff = "any" if c["numa_affinity"] is None else _nodes(c["numa_affinity"])
    devs = ", ".join(f"{d['resource']}={d['id']}" + (f" (NUMA {_nodes(d['numa_nodes'])})" if d["numa_nodes"] else "")
                     for d in c["devices"])
    line = f"  {c['name']}: cpus {_nodes(c['cpu_ids'])}"
    if c["mems"]:
        line += f", memory nodes {_nodes(c['mems'])}"
    line += f", NUMA affinity {aff}"
    if devs:
        line += f", devices {devs}"
    return line


def format_pod_line(pod: dict[str, Any]) -> str:
    return f"{pod['namespace']}/{pod['name']} uid={pod['uid']} qos={pod['qos']} phase={pod['phase']}" + (
        f" ({pod['reason']})" if pod["reason"] else ""
    )


def age(since: float, now: float | None = None) -> str:
    s = max(0, int((now or time.time()) - since))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def dumps(obj: Any) -> str:
    """``--format json`` output, indented with sorted keys (json itself: off the hot paths)."""
    import json

    return json.dumps(obj, indent=2, sort_keys=True)
