"""agent.nri.mux: NRI's multiplexed connections, over real socketpairs, with ttrpc on top."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent.nri import mux, ttrpc


def run(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(), 20))


async def _pair() -> tuple[tuple[asyncio.StreamReader, asyncio.StreamWriter],
                           tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return await asyncio.open_connection(sock=a), await asyncio.open_connection(sock=b)


def _frame(conn_id: int, data: bytes) -> bytes:
    return struct.pack(">II", conn_id, len(data)) + data


def test_chunks_are_id_length_payload_and_never_over_4_kib() -> None:
    assert mux.encode_chunks(2, b"0123456789") == b"\0\0\0\x02\0\0\0\x0a0123456789"
    data = bytes(range(256)) * 40  # 10,240 bytes
    out = mux.encode_chunks(1, data)
    sizes, pos, joined = [], 0, b""
    while pos < len(out):
        cid, n = struct.unpack_from(">II", out, pos)
        assert cid == 1
        sizes.append(n)
        joined += out[pos + 8:pos + 8 + n]
        pos += 8 + n
    assert sizes == [4096, 4096, 2048] and joined == data
    with pytest.raises(ValueError):
        mux.encode_chunks(0, b"x")


def test_frames_reach_their_connection_in_order_and_strangers_are_dropped() -> None:
    async def go() -> None:
        (ar, aw), (br, bw) = await _pair()
        m = mux.Mux(br, bw)
        one, two = m.open(1), m.open(2)
        assert m.open(1) is one
        with pytest.raises(ValueError):
            m.open(0)
        task = asyncio.create_task(m.run())
        aw.write(_frame(1, b"hel") + _frame(2, b"AB") + _frame(7, b"nobody's") + _frame(1, b"lo") + _frame(2, b""))
        aw.write(_frame(2, b"C" * 100_000))  # a large frame, as a Go writer sends a big message
        assert await one.reader.readexactly(5) == b"hello"
        assert await two.reader.readexactly(100_002) == b"AB" + b"C" * 100_000
        aw.close()
        await asyncio.wait_for(task, 5)
        assert await one.reader.read() == b"" and await two.reader.read() == b""

    run(go)


def test_oversized_frame_breaks_the_trunk_and_ends_every_connection() -> None:
    async def go() -> None:
        (ar, aw), (br, bw) = await _pair()
        m = mux.Mux(br, bw)
        one = m.open(1)
        task = asyncio.create_task(m.run())
        aw.write(struct.pack(">II", 1, mux.MAX_FRAME + 1))
        with pytest.raises(mux.MuxError, match="exceeds"):
            await asyncio.wait_for(task, 5)
        assert await one.reader.read() == b""
        assert await ar.read() == b""  # the trunk was closed
        with pytest.raises(ttrpc.ConnectionClosed):
            one.write(b"x")

    run(go)


def test_eof_inside_a_frame_is_a_broken_trunk() -> None:
    async def go() -> None:
        (ar, aw), (br, bw) = await _pair()
        m = mux.Mux(br, bw)
        task = asyncio.create_task(m.run())
        aw.write(struct.pack(">II", 1, 50) + b"partial")
        aw.write_eof()
        with pytest.raises(mux.MuxError, match="inside a frame"):
            await asyncio.wait_for(task, 5)

    run(go)


def test_ttrpc_both_ways_over_one_socket_like_a_plugin_and_its_runtime() -> None:
    async def plugin_side(payload: bytes) -> bytes:
        return b"plugin:" + payload

    async def runtime_side(payload: bytes) -> bytes:
        return b"runtime:" + payload[:16]

    async def go() -> None:
        (pr, pw), (rr, rw) = await _pair()
        plugin, runtime = mux.Mux(pr, pw), mux.Mux(rr, rw)
        tasks = [asyncio.create_task(plugin.run()), asyncio.create_task(runtime.run())]
        p_srv, p_cli = plugin.open(mux.PLUGIN_SERVICE_CONN), plugin.open(mux.RUNTIME_SERVICE_CONN)
        r_srv, r_cli = runtime.open(mux.RUNTIME_SERVICE_CONN), runtime.open(mux.PLUGIN_SERVICE_CONN)
        tasks.append(asyncio.create_task(ttrpc.Server({"P": {"Call": plugin_side}}).serve(p_srv.reader, p_srv)))
        tasks.append(asyncio.create_task(ttrpc.Server({"R": {"Call": runtime_side}}).serve(r_srv.reader, r_srv)))
        to_runtime, to_plugin = ttrpc.Client(p_cli.reader, p_cli), ttrpc.Client(r_cli.reader, r_cli)
        big = b"z" * (1 << 20)
        results = await asyncio.gather(
            *(to_runtime.call("R", "Call", f"r{i}".encode()) for i in range(50)),
            *(to_plugin.call("P", "Call", f"p{i}".encode()) for i in range(50)),
            to_runtime.call("R", "Call", big), to_plugin.call("P", "Call", big),
        )
        assert results[:50] == [f"runtime:r{i}".encode() for i in range(50)]
        assert results[50:100] == [f"plugin:p{i}".encode() for i in range(50)]
        assert results[100] == b"runtime:" + big[:16] and results[101] == b"plugin:" + big
        plugin.close()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
        with pytest.raises(ttrpc.ConnectionClosed):
            await to_plugin.call("P", "Call", b"gone")

    run(go)
