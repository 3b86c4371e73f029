"""Components for daemon tests, named in COMPONENTS-style "module:factory" strings.

They record what happened in ``EVENTS`` (in-process tests) and, when
``HWAGENT_TEST_EVENTS`` names a file, append there too (subprocess tests).
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

from agent.contracts import ACTIVE_PODS, HandleKey
from agent.contracts import DaemonContext

EVENTS: list[tuple[str, str]] = []
#: component name -> healthy(); tests flip it
HEALTH: dict[str, bool] = {}


def _record(event: str, name: str) -> None:
    EVENTS.append((event, name))
    path = os.environ.get("HWAGENT_TEST_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(f"{event} {name}\n")


class Fake:
    def __init__(self, name: str, *, fail_start: bool = False, fail_stop: bool = False,
                 hang_stop: bool = False, socket_name: str | None = None, keep_socket: bool = False) -> None:
        self.name = name
        self.fail_start = fail_start
        self.fail_stop = fail_stop
        self.hang_stop = hang_stop
        self.socket_name = socket_name
        self.keep_socket = keep_socket
        self.sock: socket.socket | None = None
        self.sock_path: Path | None = None
        self.ctx: DaemonContext | None = None

    async def start(self, ctx: DaemonContext) -> None:
        self.ctx = ctx
        _record("start", self.name)
        if self.socket_name:
            self.sock_path = ctx.path("device-plugins", self.socket_name)
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(str(self.sock_path))
            self.sock.listen()
            if self.keep_socket:
                ctx.remove_on_exit(self.sock_path)
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start: no such device")
        ctx.publish(HandleKey(self.name), self)

    async def stop(self) -> None:
        _record("stop", self.name)
        if self.sock is not None:
            self.sock.close()
            if not self.keep_socket and self.sock_path is not None:
                self.sock_path.unlink()
        if self.hang_stop:
            await asyncio.sleep(3600)
        if self.fail_stop:
            raise RuntimeError(f"{self.name} stop failed")

    def healthy(self) -> bool:
        return HEALTH.get(self.name, True)


def alpha(ctx: DaemonContext) -> Fake:
    return Fake("alpha", socket_name="alpha.sock")


def beta(ctx: DaemonContext) -> Fake:
    return Fake("beta")


def disabled(ctx: DaemonContext) -> None:
    return None


def broken(ctx: DaemonContext) -> Fake:
    return Fake("broken", fail_start=True, socket_name="broken.sock")


def bad_factory(ctx: DaemonContext) -> Fake:
    raise KeyError("missing setting")


def bad_stop(ctx: DaemonContext) -> Fake:
    return Fake("bad_stop", fail_stop=True)


def hangs(ctx: DaemonContext) -> Fake:
    return Fake("hangs", hang_stop=True)


def leaky(ctx: DaemonContext) -> Fake:
    """Forgets to unlink its socket, but registered it with ctx.remove_on_exit()."""
    return Fake("leaky", socket_name="leaky.sock", keep_socket=True)


class Crashing(Fake):
    """A component whose background task dies and asks the daemon to stop."""

    async def start(self, ctx: DaemonContext) -> None:
        await super().start(ctx)
        self._task = asyncio.get_running_loop().call_later(0.05, ctx.request_stop, "crashing: worker died")


def crashing(ctx: DaemonContext) -> Fake:
    return Crashing("crashing")


def needs_services(ctx: DaemonContext) -> Fake:
    """Reads what an earlier component published, as real components do."""
    assert ctx.lookup(HandleKey("alpha")) is not None
    # no active-pods source until admission registers one: absence means "unknown", never "none active"
    assert ctx.lookup(ACTIVE_PODS) is None
    return Fake("needs_services")


class Warming(Fake):
    """A component that is serving but still setting up in the background (as the
    pressure component is while its probes compile): ready() says so."""

    warm = False

    def ready(self) -> bool:
        return Warming.warm

    def readiness(self) -> str:
        return "warm" if Warming.warm else "loading tables"


def warming(ctx: DaemonContext) -> Warming:
    return Warming("warming")


#: contexts the ``observer`` factory was handed, with whether each was frozen then
OBSERVED: list[tuple[DaemonContext, bool]] = []


def observer(ctx: DaemonContext) -> Fake:
    """Keeps the context so a test can look at it while the daemon runs."""
    OBSERVED.append((ctx, ctx.frozen))
    return Fake("observer")
