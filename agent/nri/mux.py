"""NRI's connection multiplexer: several logical byte streams over one unix socket.

An NRI plugin and its runtime share a single socket but run two ttrpc
services, one each way. containerd/nri (pkg/net/multiplex) carries them as
logical connections: every chunk written to one is sent on the socket (the
"trunk") prefixed by an 8-byte header, the connection id and the chunk's
length (4 bytes each, big endian). Opening a connection sends nothing; both
ends simply agree on the ids. The plugin serves its Plugin service on
connection 1 and calls the runtime's Runtime service on connection 2; id 0 is
reserved. A frame for a connection nobody opened is dropped, as upstream does.

Chunking matters to a Go peer: its reader hands each frame whole to a 4 KiB
bufio buffer and fails the connection (ENOMEM) on a larger frame unless it
happens to be reading straight into a big message buffer. So this side never
sends a frame over 4 KiB; it accepts frames up to a ttrpc header plus ttrpc's
4 MiB maximum, the largest an upstream writer produces, and treats anything
larger as a broken trunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct

from agent.eventlog import get_logger
from agent.nri.ttrpc import HEADER_LEN, MAX_MESSAGE, ConnectionClosed, Writer

__all__ = ["MAX_FRAME", "MUX_HEADER", "PLUGIN_SERVICE_CONN", "RUNTIME_SERVICE_CONN", "WRITE_CHUNK",
           "Mux", "MuxConn", "MuxError", "encode_chunks"]

log = get_logger("hwagent.nri.mux")

MUX_HEADER = struct.Struct(">II")
#: the plugin's ttrpc server (the runtime calls Configure, CreateContainer, ... on it)
PLUGIN_SERVICE_CONN = 1
#: the runtime's ttrpc server (the plugin calls RegisterPlugin, UpdateContainers on it)
RUNTIME_SERVICE_CONN = 2
#: the largest frame accepted: one whole ttrpc message
MAX_FRAME = HEADER_LEN + MAX_MESSAGE
#: the largest frame sent (a Go peer's bufio.Reader size)
WRITE_CHUNK = 4096


class MuxError(ConnectionClosed):
    """The trunk broke: a frame over MAX_FRAME, or the socket failed inside a frame."""


def encode_chunks(conn_id: int, data: bytes, chunk: int = WRITE_CHUNK) -> bytes:
    """``data`` for ``conn_id`` as frames of at most ``chunk`` payload bytes, ready to write at once."""
    if conn_id <= 0:
        raise ValueError(f"multiplexed connection id {conn_id} is reserved")
    out = bytearray()
    for start in range(0, len(data), chunk):
        piece = data[start:start + chunk]
        out += MUX_HEADER.pack(conn_id, len(piece)) + piece
    return bytes(out)


class MuxConn:
    """One logical connection: an asyncio.StreamReader to read, write/drain/close to send (a ttrpc Writer)."""

    def __init__(self, mux: Mux, conn_id: int) -> None:
        self.id = conn_id
        self.reader = asyncio.StreamReader()
        self._mux = mux

    def write(self, data: bytes) -> None:
        self._mux.send(self.id, data)

    async def drain(self) -> None:
        await self._mux.drain()

    def close(self) -> None:
        self._mux.forget(self)


class Mux:
    """Demultiplexes a trunk (reader, writer) into MuxConns; ``run()`` reads it until it ends."""

    def __init__(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        self._reader = reader
        self._writer = writer
        self._conns: dict[int, MuxConn] = {}
        self._closed = False

    def open(self, conn_id: int) -> MuxConn:
        """The connection for ``conn_id`` (the same object on every call until it is closed)."""
        if conn_id <= 0 or conn_id >= 1 << 32:
            raise ValueError(f"multiplexed connection id {conn_id} is reserved or out of range")
        conn = self._conns.get(conn_id)
        if conn is None:
            conn = self._conns[conn_id] = MuxConn(self, conn_id)
            if self._closed:
                conn.reader.feed_eof()
        return conn

    def send(self, conn_id: int, data: bytes) -> None:
        if self._closed:
            raise ConnectionClosed("NRI connection closed")
        self._writer.write(encode_chunks(conn_id, data))

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            raise ConnectionClosed(f"NRI connection: {exc}") from exc

    def forget(self, conn: MuxConn) -> None:
        if self._conns.get(conn.id) is conn:
            del self._conns[conn.id]
        conn.reader.feed_eof()

    async def run(self) -> None:
        """Read frames and hand each payload to its connection; at the trunk's end, end them all.

        Returns at a clean EOF (between frames); raises MuxError on a broken trunk.
        Either way every logical connection sees EOF and the trunk is closed.
        """
        try:
            while True:
                try:
                    head = await self._reader.readexactly(MUX_HEADER.size)
                except asyncio.IncompleteReadError as exc:
                    if exc.partial:
                        raise MuxError("NRI connection closed inside a frame header") from exc
                    return
                conn_id, length = MUX_HEADER.unpack(head)
                if length > MAX_FRAME:
                    raise MuxError(f"NRI frame of {length} bytes for connection {conn_id} exceeds {MAX_FRAME}")
                try:
                    payload = await self._reader.readexactly(length)
                except asyncio.IncompleteReadError as exc:
                    raise MuxError(f"NRI connection closed inside a frame of {length} bytes") from exc
                conn = self._conns.get(conn_id)
                if conn is None:
                    log.debug("nri frame dropped", conn=conn_id, length=length)
                    continue
                conn.reader.feed_data(payload)
        except (ConnectionError, OSError) as exc:
            raise MuxError(f"NRI connection: {exc}") from exc
        finally:
            self.close()

    def close(self) -> None:
        """End every logical connection and the trunk (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for conn in list(self._conns.values()):
            conn.reader.feed_eof()
        with contextlib.suppress(Exception):
            self._writer.close()
