"""The admission socket's front: who is calling, from the kernel, for a gRPC server that cannot say.

gRPC does not hand a servicer its connection's peer credentials on a unix
socket (grpc/grpc#15511, #28755: the auth context is empty and ``peer()`` is a
bare ``unix:``). So the daemon accepts the connections on the admission socket
itself: for each one it reads SO_PEERCRED (pid, uid, gid) and SO_PEERGROUPS
(the supplementary groups) from the accepted socket, then opens a connection to
the gRPC server's own socket, which lies in a directory only root can enter,
from a socket bound to a fresh abstract name, and copies bytes both ways. The
gRPC server sees that name as the call's ``peer()``
(``unix-abstract:hwagent-peer-<hex>``) and ``caller(peer)`` maps it back to
the credentials. A name is random (128 bits), bound before the connect, held
until the connection ends and forgotten then; a call whose peer is not one of
ours (none can reach the inner socket but root) gets no caller.

The cost is one copy of each message through the loop: ``hwagent ps`` of
10,000 pods (about 19 MB) is copied once more in 64 KiB reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import socket
import struct
from pathlib import Path

from agent.eventlog import get_logger
from agent.unixsock import SUN_PATH_MAX
from agent.workloads.connlimit import ConnectionLimiter
from agent.workloads.users import Caller

__all__ = ["PeerFront", "PeerSocketServer", "peer_caller", "peer_ids", "bind_listening", "PEER_PREFIX", "BACKLOG"]

log = get_logger("hwagent.workloads")

#: the abstract name prefix of the front's connections to the inner server
PEER_PREFIX = "hwagent-peer-"
_SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
_MAX_GROUPS = 65536
_CHUNK = 1 << 16
#: the listen backlog of the sockets users reach, and the most connections accepted in one turn of
#: the loop; a connect that finds it full gets EAGAIN, which the CLI retries (agent.commands._admission)
BACKLOG = 128


def peer_ids(sock: socket.socket) -> tuple[int, int, int]:
    """The pid, uid and gid the kernel recorded for the process that connected ``sock`` (SO_PEERCRED)."""
    pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid, gid


def peer_caller(sock: socket.socket) -> Caller:
    """The credentials the kernel recorded for the process that connected ``sock``, its groups too."""
    pid, uid, gid = peer_ids(sock)
    groups: tuple[int, ...] = ()
    size = 64 * 4
    while size <= _MAX_GROUPS * 4:
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERGROUPS, size)
        except OSError as e:
            if e.errno == 34:  # ERANGE: more groups than room
                size *= 4
                continue
            raise
        groups = struct.unpack(f"{len(raw) // 4}I", raw)
        break
    return Caller(uid, gid, tuple(dict.fromkeys(groups)), pid)


def bind_listening(path: Path, mode: int, gid: int | None) -> socket.socket:
    """A unix socket bound at ``path`` with ``mode`` (and group ``gid`` when not None), ready for
    ``listen()``: the admission socket's rules, shared by every socket a user may reach
    (the admission API and the CLI's): the path fits, a stale socket is replaced and any
    other file refused, and the mode is set before any connection can be accepted."""
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise ValueError(f"socket path {path} is longer than the {SUN_PATH_MAX} bytes a unix socket holds")
    with contextlib.suppress(FileNotFoundError):
        if path.is_socket():
            path.unlink()  # a stale socket from an earlier run (serve_unix's rule)
        elif path.exists() or path.is_symlink():
            raise OSError(f"{path} exists and is not a socket; refusing to replace it")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # bound and chmod'ed before listen(): no connection is accepted under a wider mode
        sock.bind(os.fspath(path))
        if gid is not None:
            os.chown(path, 0, gid)
        os.chmod(path, mode)
    except BaseException:
        sock.close()
        raise
    return sock


class PeerSocketServer:
    """A unix socket that knows who is calling: bound by ``bind_listening``'s rules (path fits,
    mode and group set before any connection), each connection served with its caller's
    credentials (SO_PEERCRED), and every connection's task ended at ``close``. The admission
    front and the CLI's HTTP API are two of these; ``serve`` is what each does with a connection.

    With a ``limiter`` (``agent.workloads.connlimit``) each non-root connection is counted at
    accept, before a byte is read, as ``cost`` descriptors; one over the caller's cap is sent
    ``refusal(why)`` and closed at once. The accepting is this class's own (a reader on the
    listening socket), not asyncio's server: a refused connection costs an accept, one
    getsockopt, one send and a close, with no transport, stream or task made for it, so a user
    hammering at the cap costs the daemon little and root's connection is reached in the same
    turn of the loop. ``idle_s``: how long ``serve`` lets a connection sit without a complete
    request (each server applies it to its own protocol)."""

    def __init__(self, path: Path, *, mode: int = 0o600, gid: int | None = None, limit: int = _CHUNK,
                 limiter: ConnectionLimiter | None = None, cost: int = 1, idle_s: float = 60.0) -> None:
        self.path, self.mode, self.gid, self._limit = Path(path), mode, gid, limit
        self.limiter, self.cost, self.idle_s = limiter, cost, idle_s
        self._sock: socket.socket | None = None
        self._paused: asyncio.TimerHandle | None = None
        self._conns: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        sock = bind_listening(self.path, self.mode, self.gid)
        try:
            sock.listen(BACKLOG)
            sock.setblocking(False)
            asyncio.get_running_loop().add_reader(sock.fileno(), self._accept_ready)
        except BaseException:
            sock.close()
            raise
        self._sock = sock

    async def close(self) -> None:
        if self._paused is not None:
            self._paused.cancel()
            self._paused = None
        if self._sock is not None:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        for t in list(self._conns):
            t.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    @property
    def serving(self) -> bool:
        return self._sock is not None and self.path.is_socket()

    def _accept_ready(self) -> None:
        """Accept what waits (at most a backlog's worth per turn of the loop, so the loop's other
        work is not starved by a flood); refuse at once what is over a cap."""
        assert self._sock is not None
        for _ in range(BACKLOG):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors all the same (the reserve spent by the daemon's own work):
                    # stop accepting for a moment rather than spin on a readable socket
                    log.warning("accept failed", socket=self.path, error=e, note="accepting again in 0.1 s")
                    self._pause()
                return
            self._take(conn)

    def _pause(self) -> None:
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        fd = self._sock.fileno()
        loop.remove_reader(fd)

        def resume() -> None:
            self._paused = None
            if self._sock is not None:
                loop.add_reader(self._sock.fileno(), self._accept_ready)

        self._paused = loop.call_later(0.1, resume)

    def _take(self, conn: socket.socket) -> None:
        try:
            conn.setblocking(False)
            _, uid, _ = peer_ids(conn)
        except OSError as e:
            log.warning("connection without credentials", socket=self.path, error=e)
            conn.close()
            return
        if self.limiter is not None:
            why = self.limiter.acquire(uid, self.cost, self.path)
            if why is not None:
                with contextlib.suppress(OSError):
                    conn.send(self.refusal(why))  # a few hundred bytes into an empty socket buffer
                conn.close()
                return
        task = asyncio.get_running_loop().create_task(self._serve_counted(conn, uid))
        self._conns.add(task)
        task.add_done_callback(self._conns.discard)

    async def _serve_counted(self, conn: socket.socket, uid: int) -> None:
        try:
            try:
                caller = peer_caller(conn)
                reader, writer = await asyncio.open_unix_connection(sock=conn, limit=self._limit)
            except OSError as e:
                log.warning("connection without credentials", socket=self.path, error=e)
                conn.close()
                return
            await self.serve(reader, writer, caller)
        finally:
            if self.limiter is not None:
                self.limiter.release(uid, self.cost)

    def refusal(self, why: str) -> bytes:
        """What a connection over its caller's cap is sent before it is closed: nothing by default
        (a protocol with a way to say it overrides this)."""
        return b""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, caller: Caller) -> None:
        raise NotImplementedError


class PeerFront(PeerSocketServer):
    """Serve ``public`` (mode ``mode``, group ``gid`` when not None) in front of the
    gRPC server listening on ``inner``.

    A connection costs three descriptors (the accepted one, the dial, the gRPC server's side of
    it); one that sends nothing within ``idle_s`` of its accept is closed before the dial. An idle
    channel after that (no call in progress) is the gRPC server's to close
    (``grpc.max_connection_idle_ms``, set where the inner server is made); a client's channel
    reconnects by itself at its next call."""

    def __init__(self, public: Path, inner: Path, *, mode: int = 0o600, gid: int | None = None,
                 limiter: ConnectionLimiter | None = None, idle_s: float = 60.0) -> None:
        super().__init__(public, mode=mode, gid=gid, limit=_CHUNK, limiter=limiter, cost=3, idle_s=idle_s)
        self.public, self.inner = self.path, Path(inner)
        self._callers: dict[str, Caller] = {}

    def caller(self, peer: str) -> Caller | None:
        """The caller behind a gRPC ``context.peer()`` string; None for a peer the front did not make."""
        scheme, _, name = peer.partition(":")
        return self._callers.get(name) if scheme == "unix-abstract" else None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, caller: Caller) -> None:
        name = ""
        try:
            try:
                first = await asyncio.wait_for(reader.read(_CHUNK), self.idle_s)
            except TimeoutError:
                return  # silent since its accept: an idle hog, not a client (gRPC speaks first)
            if not first:
                return
            name, out = self._dial()
            self._callers[name] = caller
            r2, w2 = await asyncio.open_unix_connection(sock=out, limit=_CHUNK)
            w2.write(first)
            try:
                await asyncio.gather(_pump(reader, w2), _pump(r2, writer))
            finally:
                w2.close()
        except (OSError, asyncio.IncompleteReadError) as e:
            log.warning("admission connection failed", error=e)
        finally:
            self._callers.pop(name, None)
            writer.close()

    def _dial(self) -> tuple[str, socket.socket]:
        out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            for _ in range(8):  # a name someone else holds: draw again
                name = PEER_PREFIX + secrets.token_hex(16)
                try:
                    out.bind("\0" + name)
                    break
                except OSError:
                    continue
            else:
                raise OSError("no free abstract socket name for the admission connection")
            out.connect(os.fspath(self.inner))  # local and at once: the inner server listens
            out.setblocking(False)
        except BaseException:
            out.close()
            raise
        return name, out


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until ``src`` ends, then end ``dst``'s writing half (the other way keeps going)."""
    try:
        while data := await src.read(_CHUNK):
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()
    except (ConnectionError, OSError):
        dst.close()
