"""sd_notify against a real AF_UNIX datagram socket playing systemd."""

from __future__ import annotations

import os
import socket
import uuid

import pytest

from agent.daemon.sdnotify import Notifier, socket_address, watchdog_interval


@pytest.fixture
def systemd_socket(tmp_path):
    """A bound datagram socket and its NOTIFY_SOCKET value (a path)."""
    path = tmp_path / "notify.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(path))
    s.settimeout(5)
    yield s, str(path)
    s.close()


def _fields(datagram: bytes) -> dict[str, str]:
    return dict(line.split("=", 1) for line in datagram.decode().split("\n"))


def test_ready_status_watchdog_stopping(systemd_socket):
    sock, path = systemd_socket
    n = Notifier.from_env({"NOTIFY_SOCKET": path})
    assert n.enabled
    assert n.ready(status="running: 3 components")
    assert _fields(sock.recv(4096)) == {"READY": "1", "MAINPID": str(os.getpid()), "STATUS": "running: 3 components"}
    assert n.status("line one\nline two")
    # a newline would start a new assignment; it is flattened instead
    assert _fields(sock.recv(4096)) == {"STATUS": "line one line two"}
    assert n.watchdog()
    assert _fields(sock.recv(4096)) == {"WATCHDOG": "1"}
    assert n.stopping()
    assert _fields(sock.recv(4096)) == {"STOPPING": "1"}
    n.close()
    assert not n.watchdog()


def test_abstract_namespace_socket():
    name = f"hwagent-test-{uuid.uuid4().hex}"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.bind(b"\0" + name.encode())
        s.settimeout(5)
        n = Notifier.from_env({"NOTIFY_SOCKET": f"@{name}"})
        assert n.ready()
        assert _fields(s.recv(4096))["READY"] == "1"
        n.close()
    finally:
        s.close()


def test_disabled_without_notify_socket():
    n = Notifier.from_env({})
    assert not n.enabled
    assert not n.ready()  # a no-op, not an error


def test_unsupported_address_is_ignored(caplog):
    n = Notifier.from_env({"NOTIFY_SOCKET": "vsock:2:1234"})
    assert not n.enabled
    assert "notify socket unsupported" in caplog.text


def test_send_to_a_vanished_socket_does_not_raise(tmp_path, caplog):
    n = Notifier.from_env({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    assert n.enabled
    assert n.ready() is False
    assert "sd notify failed" in caplog.text
    n.close()


def test_socket_address():
    assert socket_address("/run/systemd/notify") == "/run/systemd/notify"
    assert socket_address("@abc") == b"\0abc"
    assert socket_address("") is None
    assert socket_address("relative/path") is None


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "junk"}, None),
        ({"WATCHDOG_USEC": "30000000"}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "4242"}, 15.0),
        # the watchdog belongs to another process (inherited environment)
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, None),
    ],
)
def test_watchdog_interval(env, expected):
    assert watchdog_interval(env, pid=4242) == expected
