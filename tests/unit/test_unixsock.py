"""The one socket-binding routine every hwagent gRPC server uses."""

import asyncio
import os
import socket
import stat

import grpc
import pytest

from agent.unixsock import serve_unix


def _serve(path):
    async def go():
        server = grpc.aio.server()
        await serve_unix(server, path)
        mode = stat.S_IMODE(os.stat(path).st_mode)
        parent = stat.S_IMODE(os.stat(path.parent).st_mode)
        await server.stop(None)
        return mode, parent

    return asyncio.run(go())


def test_socket_is_owner_only_in_a_private_new_dir(tmp_path):
    mode, parent = _serve(tmp_path / "new" / "x.sock")
    assert mode == 0o600 and parent == 0o700


def test_stale_socket_is_replaced(tmp_path):
    path = tmp_path / "x.sock"
    with socket.socket(socket.AF_UNIX) as s:  # a crashed server leaves its socket file behind
        s.bind(str(path))
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    assert _serve(path)[0] == 0o600


def test_a_regular_file_in_the_way_is_never_removed(tmp_path):
    path = tmp_path / "checkpoint"
    path.write_text("precious")
    with pytest.raises(OSError, match="not a socket"):
        _serve(path)
    assert path.read_text() == "precious"


def test_too_long_path_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="longer than the 107 bytes"):
        _serve(tmp_path / ("x" * 120) / "p.sock")


def test_only_unixsock_opens_a_client_channel():
    """Every client channel is dialled through agent.unixsock.dial, so its message
    limits are explicit (no gRPC default 4 MiB left behind in one caller)."""
    from pathlib import Path

    agent = Path(__file__).resolve().parents[2] / "agent"
    found = sorted(str(p.relative_to(agent.parent)) for p in agent.rglob("*.py")
                   if "api" not in p.relative_to(agent).parts[:1] and p.name != "unixsock.py"
                   and "insecure_channel(" in p.read_text())
    assert found == []


def test_a_client_accepts_what_its_server_may_send():
    from agent.limits import GRPC_MESSAGE_LIMITS
    from agent.unixsock import channel_options

    for api, limits in GRPC_MESSAGE_LIMITS.items():
        opts = dict(channel_options(api))
        assert opts["grpc.max_receive_message_length"] == limits.send, api
        assert opts["grpc.max_send_message_length"] == limits.receive, api
    opts = dict(channel_options("deviceplugin", receive=64 << 20))
    assert opts["grpc.max_receive_message_length"] == 64 << 20
