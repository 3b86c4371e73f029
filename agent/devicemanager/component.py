"""The daemon component: the device-plugin host in standalone mode.

Starts, in order: the device manager (reads the checkpoint), the Registration
server on ``<root>/device-plugins/registration.sock`` (removing stale sockets
first, so it must start before hwagent's own built-in plugins), the
plugin-watcher on ``<root>/plugins_registry/`` and the pod-resources v1 server
on ``<root>/pod-resources/pod-resources.sock``. In kubelet mode the kubelet is the
host, so this component is not created.

Publishes ``DEVICE_MANAGER`` (``DeviceAllocator``). Looks up nothing at start:
it starts first, so what it needs of later components is deferred (resolved
when they publish): ``ACTIVE_PODS`` for releasing the devices of gone pods, and
for pod-resources ``CPU_POLICY``, ``MEMORY_MANAGER``, ``WORKLOADS`` and ``ACTIVE_PODS``.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc
from agent.contracts import (
    ACTIVE_PODS,
    CPU_POLICY,
    DEVICE_MANAGER,
    MEMORY_MANAGER,
    POD_DIRECTORY,
    WORKLOADS,
    ActivePods,
    Deferred,
)
from agent.contracts import DaemonContext
from agent.contracts.dra import DRA_POD_CLAIMS
from agent.devicemanager.config import DEVICEMANAGER_SECTION, DeviceManagerConfig
from agent.devicemanager.manager import DeviceManager
from agent.devicemanager.registration import RegistrationServer
from agent.grpcguard import new_server
from agent.unixsock import ensure_private_dir, serve_unix
from agent.devicemanager.watcher import PluginWatcher
from agent.eventlog import get_logger
from agent.podresources.server import PodResourcesServicer
from agent.rootpaths import HostPaths, device_host

log = get_logger("hwagent.devicemanager")


def host_paths(cfg: DeviceManagerConfig, root_dir: Path) -> HostPaths:
    return device_host(
        root_dir, plugins_dir=cfg.device_plugins_dir, socket_name=cfg.socket_name,
        plugins_registry=cfg.plugins_registry_dir, pod_resources_socket=cfg.pod_resources_socket,
        checkpoint_name=cfg.checkpoint_name,
    )


class _ActivePodsWhenPublished:
    """The active-pods source as the manager sees it: until admission has published
    it (with every pod admitted before a restart), and again once it is withdrawn,
    every pod holding devices counts as active, so nothing is released on a guess."""

    def __init__(self, source: Deferred[ActivePods], manager: DeviceManager) -> None:
        self._source = source
        self._manager = manager

    def active_pod_uids(self) -> frozenset[str]:
        source = self._source()
        if source is None:
            return frozenset(a.pod_uid for a in self._manager.allocations())
        return source.active_pod_uids()


class DeviceManagerComponent:
    name = "devicemanager"

    def __init__(self, cfg: DeviceManagerConfig) -> None:
        self.cfg = cfg
        self.manager: DeviceManager | None = None
        self.registration: RegistrationServer | None = None
        self.watcher: PluginWatcher | None = None
        self._pod_resources: grpc.aio.Server | None = None
        self.paths: HostPaths | None = None

    async def start(self, ctx: DaemonContext) -> None:
        cfg = self.cfg
        paths = self.paths = host_paths(cfg, ctx.root_dir)
        self.manager = DeviceManager(
            numa_ids=ctx.topology.numa_ids,
            checkpoint_path=paths.checkpoint,
            stop_grace_seconds=cfg.stop_grace_seconds,
            prestart_timeout_seconds=cfg.prestart_timeout_seconds,
            dial_timeout_seconds=cfg.dial_timeout_seconds,
            allocate_timeout_seconds=cfg.allocate_timeout_seconds,
        )
        manager = self.manager
        manager.active_pods = _ActivePodsWhenPublished(ctx.deferred(ACTIVE_PODS), manager)
        ensure_private_dir(paths.plugins_dir)
        await self.manager.start()
        self.registration = RegistrationServer(
            self.manager, paths.plugins_dir, cfg.socket_name, reserved={cfg.checkpoint_name}
        )
        await self.registration.start()
        self.watcher = PluginWatcher(
            self.manager, paths.plugins_registry, poll_seconds=cfg.watcher_poll_seconds,
            dial_timeout=cfg.dial_timeout_seconds, getinfo_timeout=cfg.getinfo_timeout_seconds,
            notify_timeout=cfg.notify_timeout_seconds,
        )
        await self.watcher.start()
        self._pod_resources = new_server("podresources")
        cpus, workloads = ctx.deferred(CPU_POLICY), ctx.deferred(WORKLOADS)
        memory = ctx.deferred(MEMORY_MANAGER)
        servicer = PodResourcesServicer(
            devices=lambda: manager, cpus=cpus, workloads=workloads, active_pods=ctx.deferred(ACTIVE_PODS),
            memory=memory, claims=ctx.deferred(DRA_POD_CLAIMS), directory=ctx.deferred(POD_DIRECTORY),
        )
        pr_grpc.add_PodResourcesListerServicer_to_server(servicer, self._pod_resources)
        await serve_unix(self._pod_resources, paths.pod_resources_socket)
        ctx.publish(DEVICE_MANAGER, self.manager)
        log.info(
            "devicemanager started", mode=ctx.mode, registration=paths.registration_socket,
            plugins_registry=paths.plugins_registry, pod_resources=paths.pod_resources_socket,
            checkpoint=paths.checkpoint,
        )

    async def stop(self) -> None:
        if self._pod_resources is not None:
            await self._pod_resources.stop(grace=1.0)
            self._pod_resources = None
            if self.paths is not None:
                self.paths.pod_resources_socket.unlink(missing_ok=True)
        if self.watcher is not None:
            await self.watcher.stop()
        if self.registration is not None:
            await self.registration.stop()
        if self.manager is not None:
            await self.manager.stop()

    def healthy(self) -> bool:
        return bool(
            self.registration is not None and self.registration.serving
            and self.watcher is not None and self.watcher.running
        )


def factory(ctx: DaemonContext) -> DeviceManagerComponent | None:
    cfg: DeviceManagerConfig = ctx.config[DEVICEMANAGER_SECTION]
    if not cfg.enabled:
        log.info("devicemanager disabled", reason="config")
        return None
    if ctx.mode != "standalone":
        log.info("devicemanager disabled", reason="mode", mode=ctx.mode, note="the kubelet hosts device plugins")
        return None
    return DeviceManagerComponent(cfg)
