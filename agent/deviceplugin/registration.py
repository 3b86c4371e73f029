"""Register a plugin at a Registration socket and keep it registered.

The kubelet (or hwagent's own device-plugin host) may not be up yet, may
refuse, or may restart. A restarted kubelet creates a new ``kubelet.sock``
(a new inode) and deletes the plugin sockets it finds, and it never dials a
plugin on its own: the plugin has to notice and register again. So the
registrar watches the socket's identity, serves its plugin again when its
own socket is gone, and retries with capped exponential backoff.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import grpc
from prometheus_client import Counter

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from agent.deviceplugin.server import DevicePluginServer
from agent.eventlog import get_logger
from agent.tasks import cancel_and_wait
from agent.unixsock import dial

__all__ = ["API_VERSION", "register_once", "Registrar"]

log = get_logger("hwagent.deviceplugin")

API_VERSION = "v1beta1"
REGISTER_TIMEOUT_S = 5.0

REGISTRATIONS = Counter("hwagent_builtin_plugin_registrations_total",
                        "Register calls made by built-in plugins, by resource and result", ["resource", "result"])


async def register_once(reg_socket: str | Path, plugin: DevicePluginServer, timeout: float = REGISTER_TIMEOUT_S) -> None:
    """One Register call; raises grpc.aio.AioRpcError on failure."""
    async with dial(reg_socket, "registration", aio=True) as ch:
        stub = pb_grpc.RegistrationStub(ch)
        await stub.Register(
            pb.RegisterRequest(version=API_VERSION, endpoint=plugin.socket_path.name,
                               resource_name=plugin.resource, options=plugin.options()),
            timeout=timeout,
        )


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns


class Registrar:
    def __init__(self, plugin: DevicePluginServer, reg_socket: str | Path, *,
                 backoff_initial_s: float = 0.1, backoff_max_s: float = 5.0, check_interval_s: float = 0.5) -> None:
        self.plugin = plugin
        self.reg_socket = Path(reg_socket)
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.check_interval_s = check_interval_s
        #: set while registered with the current Registration socket
        self.registered = asyncio.Event()
        self.registrations = 0
        self.last_error = ""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"register:{self.plugin.resource}")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _run(self) -> None:
        backoff = self.backoff_initial_s
        while True:
            ident = _identity(self.reg_socket)
            if ident is None:
                self.last_error = f"{self.reg_socket} does not exist"
                await asyncio.sleep(self.check_interval_s)
                continue
            if not self.plugin.serving():
                log.info(
                    "plugin socket gone", resource=self.plugin.resource, socket=self.plugin.socket_path,
                    note="serving again",
                )
                await self.plugin.restart()
            try:
                await register_once(self.reg_socket, self.plugin)
            except grpc.aio.AioRpcError as e:
                self.last_error = f"{e.code().name}: {e.details()}"
                REGISTRATIONS.labels(self.plugin.resource, "error").inc()
                log.warning(
                    "register failed", resource=self.plugin.resource, socket=self.reg_socket, code=e.code().name,
                    details=e.details(), retry_in_s=round(backoff, 2),
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.backoff_max_s)
                continue
            backoff = self.backoff_initial_s
            self.registrations += 1
            self.last_error = ""
            REGISTRATIONS.labels(self.plugin.resource, "ok").inc()
            log.info(
                "registered", resource=self.plugin.resource, socket=self.reg_socket,
                endpoint=self.plugin.socket_path.name,
            )
            self.registered.set()
            # stay registered until the host's socket is replaced or ours vanishes
            while _identity(self.reg_socket) == ident and self.plugin.serving():
                await asyncio.sleep(self.check_interval_s)
            self.registered.clear()
            log.info(
                "registration lost", resource=self.plugin.resource,
                reason="plugin socket removed" if not self.plugin.serving() else "registration socket recreated",
            )
