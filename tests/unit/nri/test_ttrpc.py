"""agent.nri.ttrpc against real sockets: framing, calls, bad frames and concurrency.

Each test connects a Client (or a raw socket writing hand-made frames, to send
what a well-behaved client never would) to a Server over a unix socketpair.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent.api.ttrpc.v1 import api_pb2 as pb
from agent.nri import ttrpc
from agent.nri.ttrpc import Code, TtrpcError

SERVICE = "test.Echo"


async def _echo(payload: bytes) -> bytes:
    return payload


async def _slow(payload: bytes) -> bytes:
    await asyncio.sleep(float(payload.decode()))
    return payload


async def _fail_not_found(payload: bytes) -> bytes:
    raise TtrpcError(Code.NOT_FOUND, "no such thing")


async def _crash(payload: bytes) -> bytes:
    raise RuntimeError("handler bug")


SERVICES = {SERVICE: {"Echo": _echo, "Slow": _slow, "NotFound": _fail_not_found, "Crash": _crash}}


def run(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(), 20))


async def _pair() -> tuple[tuple[asyncio.StreamReader, asyncio.StreamWriter],
                           tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return await asyncio.open_connection(sock=a), await asyncio.open_connection(sock=b)


async def _serving() -> tuple[ttrpc.Client, asyncio.Task[None]]:
    (cr, cw), (sr, sw) = await _pair()
    task = asyncio.create_task(ttrpc.Server(SERVICES).serve(sr, sw))
    client = ttrpc.Client(cr, cw)
    client.start()
    return client, task


async def _raw() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, asyncio.Task[None]]:
    (cr, cw), (sr, sw) = await _pair()
    task = asyncio.create_task(ttrpc.Server(SERVICES).serve(sr, sw))
    return cr, cw, task


def _request(method: str, payload: bytes = b"", timeout_nano: int = 0) -> bytes:
    return pb.Request(service=SERVICE, method=method, payload=payload, timeout_nano=timeout_nano).SerializeToString()


async def _answer(reader: asyncio.StreamReader) -> tuple[int, pb.Response]:
    frame = await ttrpc.read_frame(reader)
    assert frame is not None and frame.type == ttrpc.TYPE_RESPONSE
    resp = pb.Response()
    resp.ParseFromString(frame.payload)
    return frame.stream_id, resp


def test_frame_layout_is_big_endian_length_stream_type_flags() -> None:
    assert ttrpc.encode_frame(3, ttrpc.TYPE_REQUEST, 0, b"ab") == b"\0\0\0\x02\0\0\0\x03\x01\x00ab"
    hdr = ttrpc.parse_header(b"\x00\x40\x00\x00\x00\x00\x00\x07\x02\x05")
    assert (hdr.length, hdr.stream_id, hdr.type, hdr.flags) == (4 << 20, 7, 2, 5)
    with pytest.raises(ValueError):
        ttrpc.parse_header(b"\0" * 9)


def test_encode_refuses_a_payload_over_4_mib() -> None:
    ttrpc.encode_frame(1, ttrpc.TYPE_REQUEST, 0, b"x" * ttrpc.MAX_MESSAGE)
    with pytest.raises(ttrpc.MessageTooLarge):
        ttrpc.encode_frame(1, ttrpc.TYPE_REQUEST, 0, b"x" * (ttrpc.MAX_MESSAGE + 1))


def test_call_round_trip_and_odd_increasing_stream_ids() -> None:
    async def go() -> None:
        (cr, cw), (sr, sw) = await _pair()
        client = ttrpc.Client(cr, cw)
        seen: list[int] = []

        async def peer() -> None:  # a hand-written server that records the stream ids it sees
            for _ in range(3):
                frame = await ttrpc.read_frame(sr)
                assert frame is not None and frame.type == ttrpc.TYPE_REQUEST
                seen.append(frame.stream_id)
                req = pb.Request()
                req.ParseFromString(frame.payload)
                assert (req.service, req.method) == (SERVICE, "Echo")
                body = pb.Response(status=pb.Status(code=0), payload=req.payload[::-1]).SerializeToString()
                sw.write(ttrpc.encode_frame(frame.stream_id, ttrpc.TYPE_RESPONSE, 0, body))

        task = asyncio.create_task(peer())
        assert [await client.call(SERVICE, "Echo", p) for p in (b"abc", b"", b"xy")] == [b"cba", b"", b"yx"]
        await task
        assert seen == [1, 3, 5]
        await client.close()

    run(go)


def test_unknown_service_and_method_are_unimplemented() -> None:
    async def go() -> None:
        client, _ = await _serving()
        with pytest.raises(TtrpcError) as err:
            await client.call("no.Such", "Echo", b"")
        assert err.value.code == Code.UNIMPLEMENTED and "service no.Such" in err.value.message
        with pytest.raises(TtrpcError) as err:
            await client.call(SERVICE, "Nope", b"")
        assert err.value.code == Code.UNIMPLEMENTED and "method Nope" in err.value.message
        assert await client.call(SERVICE, "Echo", b"still up") == b"still up"
        await client.close()

    run(go)


def test_handler_errors_become_statuses_and_the_connection_survives() -> None:
    async def go() -> None:
        client, _ = await _serving()
        with pytest.raises(TtrpcError) as err:
            await client.call(SERVICE, "NotFound", b"")
        assert (err.value.code, err.value.message) == (Code.NOT_FOUND, "no such thing")
        with pytest.raises(TtrpcError) as err:
            await client.call(SERVICE, "Crash", b"")
        assert (err.value.code, err.value.message) == (Code.UNKNOWN, "handler bug")
        assert await client.call(SERVICE, "Echo", b"ok") == b"ok"
        await client.close()

    run(go)


def test_concurrent_calls_are_answered_each_on_its_stream_slow_ones_not_blocking() -> None:
    async def go() -> None:
        client, _ = await _serving()
        finished: list[str] = []

        async def one(method: str, payload: bytes) -> bytes:
            out = await client.call(SERVICE, method, payload)
            finished.append(payload.decode())
            return out

        slow = asyncio.create_task(one("Slow", b"0.5"))
        await asyncio.sleep(0.05)
        payloads = [f"p{i}".encode() for i in range(200)]
        results = await asyncio.gather(*(one("Echo", p) for p in payloads))
        assert results == payloads
        assert not slow.done(), "200 quick calls waited behind one slow call"
        assert await slow == b"0.5"
        assert finished[-1] == "0.5"
        await client.close()

    run(go)


def test_malformed_frames_get_invalid_argument_and_the_connection_survives() -> None:
    async def go() -> None:
        reader, writer, _ = await _raw()
        # an even stream id (server-initiated ids are not for clients)
        writer.write(ttrpc.encode_frame(2, ttrpc.TYPE_REQUEST, 0, _request("Echo", b"x")))
        sid, resp = await _answer(reader)
        assert (sid, resp.status.code) == (2, Code.INVALID_ARGUMENT) and "odd" in resp.status.message
        # a payload that is not a Request at all
        writer.write(ttrpc.encode_frame(3, ttrpc.TYPE_REQUEST, 0, b"\xff\xff\xff\xff"))
        sid, resp = await _answer(reader)
        assert (sid, resp.status.code) == (3, Code.INVALID_ARGUMENT) and "unmarshal" in resp.status.message
        # a data frame: no streams here
        writer.write(ttrpc.encode_frame(5, ttrpc.TYPE_DATA, 0, b""))
        sid, resp = await _answer(reader)
        assert (sid, resp.status.code) == (5, Code.INVALID_ARGUMENT)
        # a good request, then one re-using an older stream id
        writer.write(ttrpc.encode_frame(9, ttrpc.TYPE_REQUEST, 0, _request("Echo", b"fine")))
        sid, resp = await _answer(reader)
        assert (sid, resp.status.code, resp.payload) == (9, Code.OK, b"fine")
        writer.write(ttrpc.encode_frame(7, ttrpc.TYPE_REQUEST, 0, _request("Echo", b"late")))
        sid, resp = await _answer(reader)
        assert (sid, resp.status.code) == (7, Code.INVALID_ARGUMENT) and "increment" in resp.status.message
        writer.close()

    run(go)


def test_oversized_length_is_read_past_and_refused_with_resource_exhausted() -> None:
    async def go() -> None:
        reader, writer, task = await _raw()
        size = ttrpc.MAX_MESSAGE + 1
        writer.write(struct.pack(">IIBB", size, 1, ttrpc.TYPE_REQUEST, 0) + b"\0" * size)
        writer.write(ttrpc.encode_frame(3, ttrpc.TYPE_REQUEST, 0, _request("Echo", b"after")))
        sid, resp = await _answer(reader)
        assert (sid, resp.status.code) == (1, Code.RESOURCE_EXHAUSTED)
        sid, resp = await _answer(reader)
        assert (sid, resp.status.code, resp.payload) == (3, Code.OK, b"after")
        assert not task.done()
        writer.close()

    run(go)


def test_eof_inside_a_frame_ends_the_server_cleanly() -> None:
    async def go() -> None:
        reader, writer, task = await _raw()
        writer.write(struct.pack(">IIBB", 100, 1, ttrpc.TYPE_REQUEST, 0) + b"short")
        writer.write_eof()
        await asyncio.wait_for(task, 5)
        assert task.exception() is None
        assert await reader.read() == b""  # closed without an answer

    run(go)


def test_server_deadline_from_timeout_nano() -> None:
    async def go() -> None:
        reader, writer, _ = await _raw()
        writer.write(ttrpc.encode_frame(1, ttrpc.TYPE_REQUEST, 0,
                                        _request("Slow", b"5", timeout_nano=100_000_000)))
        sid, resp = await asyncio.wait_for(_answer(reader), 3)
        assert (sid, resp.status.code) == (1, Code.DEADLINE_EXCEEDED)
        writer.close()

    run(go)


def test_client_timeout_and_peer_gone() -> None:
    async def go() -> None:
        client, server = await _serving()
        with pytest.raises(TtrpcError) as err:
            await client.call(SERVICE, "Slow", b"5", timeout=0.1)
        assert err.value.code == Code.DEADLINE_EXCEEDED
        with pytest.raises(ttrpc.MessageTooLarge):
            await client.call(SERVICE, "Echo", b"x" * (ttrpc.MAX_MESSAGE + 1))
        pending = asyncio.create_task(client.call(SERVICE, "Slow", b"5"))
        await asyncio.sleep(0.05)
        server.cancel()  # the server side goes away (its socket is closed)
        with pytest.raises(ttrpc.ConnectionClosed):
            await asyncio.wait_for(pending, 3)
        await client.wait_closed()
        assert client.closed
        with pytest.raises(ttrpc.ConnectionClosed):
            await client.call(SERVICE, "Echo", b"")

    run(go)


def test_unary_decodes_typed_requests_and_refuses_garbage() -> None:
    async def go() -> None:
        async def keys(req: pb.Request) -> pb.StringList:
            return pb.StringList(list=[kv.key for kv in req.metadata])

        handler = ttrpc.unary(pb.Request, keys)
        out = pb.StringList()
        out.ParseFromString(await handler(pb.Request(metadata=[pb.KeyValue(key="a"), pb.KeyValue(key="b")])
                                          .SerializeToString()))
        assert list(out.list) == ["a", "b"]
        with pytest.raises(TtrpcError) as err:
            await handler(b"\xff\xff")
        assert err.value.code == Code.INVALID_ARGUMENT

    run(go)
