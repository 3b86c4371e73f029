"""Kubelet mode: the memory plugin as a daemon component (ResourcePlugin v1alpha1).

A QRM-enabled kubelet finds the socket in its plugin-watcher directory
(``<kubelet_root_dir>/plugins_registry/qrm_memory_plugin_dynamic.sock``), asks
pluginregistration v1 ``GetInfo`` (type ResourcePlugin, name ``memory``) and
then calls the ResourcePlugin service on the same socket, as it does for the
CPU plugin (agent.cpu.component). Not created in standalone mode: there
admission asks the memory manager in-process.

Looks up ``MEMORY_MANAGER`` (the memory manager starts before it); publishes
nothing. The answers are agent.memory.qrm's.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from agent.contracts import MEMORY_MANAGER, DaemonContext
from agent.daemonconfig import DAEMON_SECTION
from agent.eventlog import get_logger

__all__ = ["MemoryPluginComponent", "SOCKET_NAME", "factory", "socket_path_for"]

log = get_logger("hwagent.memory")

#: the socket's name in the kubelet's plugins_registry (Katalyst's QRM plugins are named alike)
SOCKET_NAME = "qrm_memory_plugin_dynamic.sock"


def socket_path_for(ctx: DaemonContext) -> Path:
    return Path(ctx.config[DAEMON_SECTION].kubelet_root_dir) / "plugins_registry" / SOCKET_NAME


class MemoryPluginComponent:
    name = "memory-plugin"

    def __init__(self) -> None:
        self.socket_path: Path | None = None
        self._server: Any = None
        self._reg: Any = None

    async def start(self, ctx: DaemonContext) -> None:
        from agent.cpu.server import RegistrationServicer  # grpc stays out of factory import time
        from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
        from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
        from agent.contracts.memory import MEMORY_RESOURCE
        from agent.grpcguard import new_server
        from agent.memory.qrm import MemoryPluginServicer
        from agent.unixsock import serve_unix

        allocator = ctx.lookup(MEMORY_MANAGER)
        if allocator is None:
            log.warning("memory plugin not served", reason="the memory manager does not run in this daemon")
            return
        self.socket_path = socket_path_for(ctx)
        server = new_server("resourceplugin")
        pb_grpc.add_ResourcePluginServicer_to_server(MemoryPluginServicer(allocator), server)
        self._reg = RegistrationServicer(str(self.socket_path), MEMORY_RESOURCE)
        reg_grpc.add_RegistrationServicer_to_server(self._reg, server)
        await serve_unix(server, self.socket_path)
        self._server = server
        log.info("memory plugin started", socket=self.socket_path)

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0.5)
            self._server = None
        if self.socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()

    def healthy(self) -> bool:
        if self._server is None:
            return self.socket_path is None  # not served (no memory manager): nothing to be unhealthy about
        if self.socket_path is None or not self.socket_path.is_socket():
            return False
        return self._reg is None or self._reg.registered is not False  # False: the kubelet refused it


def factory(ctx: DaemonContext) -> MemoryPluginComponent | None:
    return MemoryPluginComponent() if ctx.mode == "kubelet" else None
