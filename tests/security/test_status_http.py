"""Issue 37 item 16: the read commands ask the daemon's status over HTTP/JSON now
(``<root>/status-http.sock``, agent.status.httpapi), and those answers stay root's alone.

The status names every user's pods, CPUs, devices and memory (issue 32 items 7 and 9), so the new
socket is held to ``status.sock``'s rule twice: by its mode (root:root 0600, so a user's connect
is refused by the kernel) and by the daemon, which reads each connection's caller (SO_PEERCRED)
and answers anyone but root 403 with nothing of the status: a socket an admin loosened
(chmod 0666) still tells a user nothing. Root's outputs are the same over either socket.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator

import pytest

from tests.security.support import ALICE, MALLORY, Box, as_user, security_box

pytestmark = pytest.mark.timeout(600)

GROUP = "hws" + ALICE[-8:]
#: root's pod: its name must reach no one but root
SECRET = "rootsecret37"
#: what a user runs to ask the socket itself, as curl --unix-socket would
ASK = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect:", e.strerror); sys.exit(3)
s.sendall(b"GET " + sys.argv[2].encode() + b" HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.decode())
"""
READS = [(c, *f) for c in ("status", "cpus", "memory", "resources") for f in ((), ("--format", "json"))]
_UPTIME = re.compile(r'(up: \d+s|"uptime_seconds": [0-9.e"+-]+)')


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    for b in security_box(group=GROUP):
        r = b.cli(None, "launch", "--name", SECRET, "--", "sleep", "600")
        assert r.returncode == 0, r.stderr
        b.running(SECRET)
        yield b


def _sock(box: Box) -> str:
    return str(box.root / "status-http.sock")


def test_the_http_status_socket_is_roots_alone(box):
    st = os.stat(_sock(box))
    assert stat.S_ISSOCK(st.st_mode) and st.st_uid == 0 and st.st_gid == 0 and stat.S_IMODE(st.st_mode) == 0o600


@pytest.mark.parametrize("user", [ALICE, MALLORY])
def test_a_user_cannot_connect(box, user):
    r = as_user(user, "python3", "-c", ASK, _sock(box), "/v1/status")
    assert r.returncode == 3 and "Permission denied" in r.stdout, r.stdout + r.stderr
    assert SECRET not in r.stdout


@pytest.mark.parametrize("path", ["/v1/status", "/v1/views/cpus", "/v1/views/memory", "/v1/views/resources"])
def test_a_loosened_socket_still_answers_root_alone(box, path):
    """An admin's chmod 0666 lets the connect through; the daemon still answers a member 403, no status."""
    os.chmod(_sock(box), 0o666)
    try:
        r = as_user(ALICE, "python3", "-c", ASK, _sock(box), path)
        root = as_user("root", "python3", "-c", ASK, _sock(box), "/v1/status")
    finally:
        os.chmod(_sock(box), 0o600)
    assert r.returncode == 0 and r.stdout.startswith("HTTP/1.1 403 "), r.stdout + r.stderr
    assert "PERMISSION_DENIED" in r.stdout and SECRET not in r.stdout
    assert root.stdout.startswith("HTTP/1.1 200 ") and SECRET in root.stdout  # the control


def test_root_reads_the_same_over_http_as_over_grpc(box):
    """Last in this module: it takes the HTTP socket's file away (a daemon from before it) to ask gRPC."""
    over_http = {a: box.cli(None, *a) for a in READS}
    assert all(r.returncode == 0 for r in over_http.values()), {a: r.stderr for a, r in over_http.items()}
    assert SECRET in over_http[("status",)].stdout and SECRET in over_http[("cpus",)].stdout
    os.unlink(_sock(box))
    over_grpc = {a: box.cli(None, *a) for a in READS}
    for a in READS:
        assert _UPTIME.sub("", over_http[a].stdout) == _UPTIME.sub("", over_grpc[a].stdout), a
