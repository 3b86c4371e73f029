"""ttrpc, containerd's lightweight RPC, on asyncio: the framing, a client and a server.

NRI runtimes speak ttrpc, not gRPC, and PyPI has no ttrpc library, so this is
hwagent's own, written from the protocol as containerd/ttrpc v1.2 implements it:

* a frame is a 10-byte header (payload length, stream id: 4 bytes each, big
  endian; message type: 1 byte; flags: 1 byte) and the payload;
* a request frame (type 1) carries an encoded ``ttrpc.Request`` (service,
  method, encoded argument, relative deadline in ns, metadata); the answer is a
  response frame (type 2) with the same stream id carrying ``ttrpc.Response``
  (a gRPC status and the encoded result);
* a client numbers its streams with odd ids, each larger than the last;
* no payload exceeds 4 MiB: an oversized frame is read past (the connection
  survives) and answered with RESOURCE_EXHAUSTED;
* an unknown service or method is UNIMPLEMENTED, a bad stream id or an
  undecodable request INVALID_ARGUMENT, a handler's plain exception UNKNOWN,
  status codes numbered as gRPC's.

Only unary calls exist here (NRI uses no ttrpc streams); a data frame (type 3)
is refused with INVALID_ARGUMENT. Both ends work over any byte stream with an
``asyncio.StreamReader`` side and a ``write``/``drain``/``close`` side: a unix
socket's, or one logical connection of NRI's multiplexer (``agent.nri.mux``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from google.protobuf.message import DecodeError, Message

from agent.api.ttrpc.v1 import api_pb2 as pb
from agent.eventlog import get_logger

__all__ = [
    "FLAG_NO_DATA", "FLAG_REMOTE_CLOSED", "FLAG_REMOTE_OPEN", "HEADER_LEN", "MAX_MESSAGE",
    "TYPE_DATA", "TYPE_REQUEST", "TYPE_RESPONSE", "Client", "Code", "ConnectionClosed",
    "Frame", "FrameHeader", "Handler", "MessageTooLarge", "Server", "TtrpcError", "Writer",
    "encode_frame", "parse_header", "read_frame", "unary",
]

log = get_logger("hwagent.nri.ttrpc")

HEADER = struct.Struct(">IIBB")
HEADER_LEN = HEADER.size  # 10
#: the largest payload either end sends or accepts (ttrpc's messageLengthMax)
MAX_MESSAGE = 4 << 20

TYPE_REQUEST = 0x1
TYPE_RESPONSE = 0x2
TYPE_DATA = 0x3

FLAG_REMOTE_CLOSED = 0x1
FLAG_REMOTE_OPEN = 0x2
FLAG_NO_DATA = 0x4

_MAX_STREAM_ID = (1 << 32) - 1
_DISCARD_CHUNK = 64 << 10


class Code(enum.IntEnum):
    """gRPC status codes, the numbers ttrpc's Response.status carries."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class TtrpcError(Exception):
    """A call that ended with a non-OK status (raised by a client, or by a handler to choose the code)."""

    def __init__(self, code: int, message: str) -> None:
        try:
            self.code: Code | int = Code(code)
        except ValueError:
            self.code = code
        self.message = message
        name = self.code.name if isinstance(self.code, Code) else str(code)
        super().__init__(f"ttrpc {name}: {message}")


class ConnectionClosed(Exception):
    """The connection ended before the call was answered."""


class MessageTooLarge(ValueError):
    """A payload over MAX_MESSAGE: ttrpc peers refuse it, so it is never sent."""


class Writer(Protocol):
    """The sending half of a byte stream (asyncio.StreamWriter, or a multiplexed connection)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class FrameHeader:
    length: int
    stream_id: int
    type: int
    flags: int


@dataclass(frozen=True)
class Frame:
    """One frame as read. ``oversized`` frames had their payload read past, not kept."""

    stream_id: int
    type: int
    flags: int
    payload: bytes
    oversized: int = 0


def encode_frame(stream_id: int, mtype: int, flags: int, payload: bytes) -> bytes:
    """Header and payload as one buffer, so a single write keeps frames whole."""
    if len(payload) > MAX_MESSAGE:
        raise MessageTooLarge(f"ttrpc message of {len(payload)} bytes exceeds the maximum of {MAX_MESSAGE}")
    if not 0 <= stream_id <= _MAX_STREAM_ID:
        raise ValueError(f"stream id {stream_id} does not fit 32 bits")
    return HEADER.pack(len(payload), stream_id, mtype, flags) + payload


def parse_header(data: bytes) -> FrameHeader:
    """The four header fields of a 10-byte buffer."""
    if len(data) != HEADER_LEN:
        raise ValueError(f"a ttrpc header is {HEADER_LEN} bytes, not {len(data)}")
    length, stream_id, mtype, flags = HEADER.unpack(data)
    return FrameHeader(length, stream_id, mtype, flags)


async def read_frame(reader: asyncio.StreamReader) -> Frame | None:
    """The next frame, or None at a clean end of stream (EOF between frames).

    A frame announcing more than MAX_MESSAGE is consumed without being kept
    (the stream stays in step) and comes back with ``oversized`` set. EOF inside
    a frame raises ``ConnectionClosed``.
    """
    try:
        head = await reader.readexactly(HEADER_LEN)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise ConnectionClosed(f"connection closed inside a frame header ({len(exc.partial)} bytes)") from exc
    hdr = parse_header(head)
    try:
        if hdr.length > MAX_MESSAGE:
            left = hdr.length
            while left:
                chunk = await reader.readexactly(min(left, _DISCARD_CHUNK))
                left -= len(chunk)
            return Frame(hdr.stream_id, hdr.type, hdr.flags, b"", oversized=hdr.length)
        payload = await reader.readexactly(hdr.length) if hdr.length else b""
    except asyncio.IncompleteReadError as exc:
        raise ConnectionClosed(f"connection closed inside a frame of {hdr.length} bytes") from exc
    return Frame(hdr.stream_id, hdr.type, hdr.flags, payload)


# -- client -----------------------------------------------------------------


class Client:
    """Unary calls over one connection; any number may be in flight at once."""

    def __init__(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        self._reader = reader
        self._writer = writer
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[pb.Response]] = {}
        self._closed: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start reading responses (call once, inside the running loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._receive(), name="ttrpc-client")

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def wait_closed(self) -> None:
        """Return when the connection has ended (the peer went away or close() was called)."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)

    async def call(self, service: str, method: str, payload: bytes, *,
                   timeout: float | None = None, metadata: Mapping[str, str] | None = None) -> bytes:
        """Send one request; return the response payload or raise TtrpcError / ConnectionClosed."""
        if self._closed is not None:
            raise ConnectionClosed(f"ttrpc connection closed: {self._closed}")
        self.start()
        if self._next_id > _MAX_STREAM_ID:
            raise ConnectionClosed("ttrpc stream ids exhausted on this connection")
        stream_id = self._next_id
        self._next_id += 2
        req = pb.Request(service=service, method=method, payload=payload,
                         timeout_nano=int(timeout * 1e9) if timeout else 0)
        for key, value in (metadata or {}).items():
            req.metadata.add(key=key, value=value)
        frame = encode_frame(stream_id, TYPE_REQUEST, 0, req.SerializeToString())
        fut: asyncio.Future[pb.Response] = asyncio.get_running_loop().create_future()
        self._pending[stream_id] = fut
        try:
            self._writer.write(frame)
            await self._writer.drain()
            resp = await asyncio.wait_for(fut, timeout) if timeout else await fut
        except TimeoutError:
            raise TtrpcError(Code.DEADLINE_EXCEEDED, f"{service}/{method}: no answer in {timeout} s") from None
        finally:
            self._pending.pop(stream_id, None)
        if resp.status.code != Code.OK:
            raise TtrpcError(resp.status.code, resp.status.message)
        return resp.payload

    async def _receive(self) -> None:
        reason: BaseException = ConnectionClosed("ttrpc connection closed by peer")
        try:
            while True:
                frame = await read_frame(self._reader)
                if frame is None:
                    break
                fut = self._pending.get(frame.stream_id)
                if frame.type != TYPE_RESPONSE or fut is None or fut.done():
                    log.debug("ttrpc frame ignored", side="client", type=frame.type, stream=frame.stream_id)
                    continue
                if frame.oversized:
                    fut.set_result(pb.Response(status=pb.Status(
                        code=Code.RESOURCE_EXHAUSTED,
                        message=f"response of {frame.oversized} bytes exceeds the maximum of {MAX_MESSAGE}")))
                    continue
                resp = pb.Response()
                try:
                    resp.ParseFromString(frame.payload)
                except DecodeError as exc:
                    resp = pb.Response(status=pb.Status(code=Code.INTERNAL, message=f"undecodable response: {exc}"))
                fut.set_result(resp)
        except (ConnectionClosed, OSError) as exc:
            reason = exc
        except asyncio.CancelledError:
            reason = ConnectionClosed("ttrpc client closed")
            raise
        finally:
            self._shut(reason)

    def _shut(self, reason: BaseException) -> None:
        if self._closed is None:
            self._closed = reason
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionClosed(str(reason)))
        self._pending.clear()
        with contextlib.suppress(Exception):
            self._writer.close()

    async def close(self) -> None:
        self._shut(ConnectionClosed("ttrpc client closed"))
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


# -- server -----------------------------------------------------------------

#: a method: the encoded argument in, the encoded result out (or TtrpcError)
Handler = Callable[[bytes], Awaitable[bytes]]

Req = TypeVar("Req", bound=Message)


def unary(request_type: type[Req], fn: Callable[[Req], Awaitable[Message]]) -> Handler:
    """A Handler from a typed coroutine: decode the argument (INVALID_ARGUMENT if it will not), encode the result."""

    async def handle(payload: bytes) -> bytes:
        req = request_type()
        try:
            req.ParseFromString(payload)
        except DecodeError as exc:
            raise TtrpcError(Code.INVALID_ARGUMENT, f"unmarshal request error: {exc}") from None
        return (await fn(req)).SerializeToString()

    return handle


class Server:
    """Serves ``services`` (service name -> method name -> Handler) on connections it is given.

    Each request runs in its own task, so a slow handler does not hold up the
    next request on the same connection; answers are written whole, in the
    order they finish.
    """

    def __init__(self, services: Mapping[str, Mapping[str, Handler]]) -> None:
        self._services = {name: dict(methods) for name, methods in services.items()}

    async def serve(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        """Answer requests until the peer closes the connection; then cancel what is still running."""
        tasks: set[asyncio.Task[None]] = set()
        last_id = 0
        try:
            while True:
                try:
                    frame = await read_frame(reader)
                except (ConnectionClosed, OSError) as exc:
                    log.debug("ttrpc connection ended", side="server", error=str(exc))
                    break
                if frame is None:
                    break
                if frame.oversized:
                    await self._send_status(writer, frame.stream_id, Code.RESOURCE_EXHAUSTED,
                                            f"message length {frame.oversized} exceeds maximum message size of {MAX_MESSAGE}")
                    continue
                if frame.stream_id % 2 != 1:
                    await self._send_status(writer, frame.stream_id, Code.INVALID_ARGUMENT,
                                            "stream id must be odd for client-initiated streams")
                    continue
                if frame.type == TYPE_DATA:
                    await self._send_status(writer, frame.stream_id, Code.INVALID_ARGUMENT,
                                            "ttrpc streams are not supported by this server")
                    continue
                if frame.type != TYPE_REQUEST:
                    log.debug("ttrpc frame ignored", side="server", type=frame.type, stream=frame.stream_id)
                    continue
                if frame.stream_id <= last_id:
                    await self._send_status(writer, frame.stream_id, Code.INVALID_ARGUMENT,
                                            "stream id cannot be re-used and must increment")
                    continue
                last_id = frame.stream_id
                req = pb.Request()
                try:
                    req.ParseFromString(frame.payload)
                except DecodeError as exc:
                    await self._send_status(writer, frame.stream_id, Code.INVALID_ARGUMENT,
                                            f"unmarshal request error: {exc}")
                    continue
                task = asyncio.get_running_loop().create_task(self._dispatch(writer, frame.stream_id, req))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            for task in list(tasks):
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                writer.close()

    def resolve(self, service: str, method: str) -> Handler:
        """The handler for a call, or TtrpcError(UNIMPLEMENTED) naming what is missing."""
        methods = self._services.get(service)
        if methods is None:
            raise TtrpcError(Code.UNIMPLEMENTED, f"service {service}")
        handler = methods.get(method)
        if handler is None:
            raise TtrpcError(Code.UNIMPLEMENTED, f"method {method}")
        return handler

    async def _dispatch(self, writer: Writer, stream_id: int, req: pb.Request) -> None:
        try:
            handler = self.resolve(req.service, req.method)
            call = handler(req.payload)
            if req.timeout_nano > 0:
                result = await asyncio.wait_for(call, req.timeout_nano / 1e9)
            else:
                result = await call
        except TtrpcError as exc:
            await self._send_status(writer, stream_id, int(exc.code), exc.message)
            return
        except TimeoutError:
            await self._send_status(writer, stream_id, Code.DEADLINE_EXCEEDED,
                                    f"{req.service}/{req.method}: deadline exceeded")
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a handler's bug is the caller's UNKNOWN, not the connection's end
            log.warning("ttrpc handler failed", service=req.service, method=req.method, error=str(exc), exc_info=True)
            await self._send_status(writer, stream_id, Code.UNKNOWN, str(exc) or type(exc).__name__)
            return
        resp = pb.Response(status=pb.Status(code=Code.OK), payload=result)
        try:
            frame = encode_frame(stream_id, TYPE_RESPONSE, 0, resp.SerializeToString())
        except MessageTooLarge as exc:
            await self._send_status(writer, stream_id, Code.RESOURCE_EXHAUSTED, str(exc))
            return
        await self._write(writer, frame)

    async def _send_status(self, writer: Writer, stream_id: int, code: int, message: str) -> None:
        resp = pb.Response(status=pb.Status(code=code, message=message))
        await self._write(writer, encode_frame(stream_id & _MAX_STREAM_ID, TYPE_RESPONSE, 0, resp.SerializeToString()))

    @staticmethod
    async def _write(writer: Writer, frame: bytes) -> None:
        try:
            writer.write(frame)
            await writer.drain()
        except (ConnectionError, OSError, ConnectionClosed) as exc:
            log.debug("ttrpc answer not sent", error=str(exc))
