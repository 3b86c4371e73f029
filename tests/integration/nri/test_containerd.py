"""hwagent's NRI plugin against the real containerd (1.7 from Debian 13, NRI switched on).

A private containerd runs under a tmp dir; the plugin runs as its own process
(``python -m agent.nri.plugin``, one JSON line per event). The evidence of each
step comes from both sides: containerd's log ("plugin ... registered as
"90-hwagent"", "synchronizing plugin 90-hwagent") and the plugin's events
(configured by containerd, synchronized).
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.nri.containerd import Containerd, skip_reason

REPO = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.root, pytest.mark.slow]

_SKIP = skip_reason()
if _SKIP:
    pytestmark.append(pytest.mark.skip(reason=_SKIP))


def q(pattern: str) -> str:
    """``pattern`` with each '"' also matching containerd's logfmt-escaped '\\"'."""
    return pattern.replace('"', r'\\?"')


class PluginProcess:
    """``python -m agent.nri.plugin`` on the containerd's NRI socket; its events read as they come."""

    def __init__(self, socket: Path, index: str = "90", name: str = "hwagent") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent.nri.plugin", "--socket", str(socket), "--index", index, "--name", name,
             "--reconnect-interval", "0.1"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        assert self.proc.stdout is not None
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        self._buf = b""
        self.events: list[dict[str, Any]] = []

    def wait_event(self, name: str, timeout: float = 10.0, after: int = 0) -> dict[str, Any]:
        """The first event called ``name`` at or after position ``after``, reading until it comes."""
        deadline = time.monotonic() + timeout
        while True:
            for ev in self.events[after:]:
                if ev["event"] == name:
                    return ev
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(f"plugin never reported {name!r}; events: {self.events}; "
                                     f"stderr: {self._stderr()}")
            if self._sel.select(min(left, 0.2)):
                assert self.proc.stdout is not None
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                self._buf += chunk
                *lines, self._buf = self._buf.split(b"\n")
                self.events += [json.loads(line) for line in lines if line.strip()]

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")[-2000:]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


@pytest.fixture
def containerd() -> Iterator[Containerd]:
    base = Path(tempfile.mkdtemp(prefix="nri-", dir="/tmp"))
    ctd = Containerd(base)
    try:
        yield ctd
    finally:
        ctd.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def plugin_factory() -> Iterator[Any]:
    started: list[PluginProcess] = []

    def start(socket: Path, **kw: str) -> PluginProcess:
        p = PluginProcess(socket, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


def test_plugin_registers_and_is_configured_and_synchronized(containerd: Containerd, plugin_factory: Any) -> None:
    startup_s = containerd.start()
    began = time.monotonic()
    plugin = plugin_factory(containerd.nri_socket)

    registered = plugin.wait_event("registered")
    configured = plugin.wait_event("configured")
    synced = plugin.wait_event("synchronized")
    ready_s = time.monotonic() - began

    line = containerd.wait_log(q(r'plugin "external:90-hwagent\[(\d+)\]" registered as "90-hwagent"'))
    assert int(line.group(1)) == plugin.proc.pid  # containerd saw this very process (SO_PEERCRED)
    containerd.wait_log(r"synchronizing plugin 90-hwagent")
    containerd.wait_log(q(r'plugin "90-hwagent" connected'))

    assert registered["name"] == "90-hwagent"
    assert configured["runtime"] == "containerd" and configured["version"].removeprefix("v").startswith(("1.7", "2."))
    assert "CREATE_CONTAINER" in configured["events"]
    assert (synced["pods"], synced["containers"]) == (0, 0)  # a fresh containerd has none
    print(f"\ncontainerd NRI socket up in {startup_s * 1000:.0f} ms; plugin process to synchronized in "
          f"{ready_s * 1000:.0f} ms; RegisterPlugin round trip {registered['round_trip_ms']:.2f} ms")

    assert plugin.stop() == 0  # SIGTERM: a clean exit
    containerd.wait_log(q(r'connection to plugin "90-hwagent" closed'))


def test_plugin_registers_again_after_containerd_restarts(containerd: Containerd, plugin_factory: Any) -> None:
    containerd.start()
    plugin = plugin_factory(containerd.nri_socket)
    plugin.wait_event("synchronized")
    containerd.wait_log(q(r'registered as "90-hwagent"'))

    containerd.stop()
    gone = plugin.wait_event("disconnected")
    n = len(plugin.events)
    restart_s = containerd.start()
    plugin.wait_event("registered", after=n)
    plugin.wait_event("synchronized", after=n)
    containerd.wait_log(q(r'plugin "external:90-hwagent\[\d+\]" registered as "90-hwagent"'))
    containerd.wait_log(r"synchronizing plugin 90-hwagent")
    back = next(e for e in plugin.events[n:] if e["event"] == "registered")
    print(f"\ncontainerd restarted in {restart_s * 1000:.0f} ms; plugin registered again "
          f"{(back['t'] - gone['t']) * 1000:.0f} ms after it lost the connection")
    assert plugin.proc.poll() is None  # one plugin process throughout


def test_two_plugins_are_called_in_index_order(containerd: Containerd, plugin_factory: Any) -> None:
    """The index is the runtime's order: containerd lists 10-early before 90-hwagent."""
    containerd.start()
    late = plugin_factory(containerd.nri_socket)
    late.wait_event("synchronized")
    early = plugin_factory(containerd.nri_socket, index="10", name="early")
    early.wait_event("synchronized")
    containerd.wait_log(q(r'#1: "10-early".*\n(?:.*\n)*?.*#2: "90-hwagent"'))


def test_a_message_over_4_kib_reaches_containerd_whole(containerd: Containerd, plugin_factory: Any) -> None:
    """containerd's multiplexer hands each frame to a 4 KiB buffer and drops the connection on a
    bigger one: sent as one frame, this 10 KB RegisterPlugin timed out ("plugin registration timed
    out"); agent.nri.mux sends it in 4 KiB frames and containerd registers the plugin."""
    containerd.start()
    name = "h" * 10_000
    plugin = plugin_factory(containerd.nri_socket, name=name)
    assert plugin.wait_event("registered")["name"] == f"90-{name}"
    plugin.wait_event("synchronized")
    containerd.wait_log(q(rf'registered as "90-{name}"'))
