"""The plugin-watcher path: plugins that drop a registration socket into
``plugins_registry/`` instead of calling Register.

The directory is rescanned on a timer (no inotify: it works the same on every
filesystem and in fixture trees, and a scan of a handful of entries is cheap).
For each new socket: GetInfo, validate (type DevicePlugin, v1beta1 offered,
extended resource name, a safe endpoint path), connect through the manager,
then NotifyRegistrationStatus. A socket that disappears or is replaced
deregisters its endpoint. Failed registrations are retried with backoff while
the socket stays.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from agent.devicemanager.metrics import REGISTRATIONS
from agent.contracts.devices import API_VERSION
from agent.devicemanager.selection import AllocationError
from agent.devicemanager.types import PluginRegistry
from agent.devices.names import extended_resource_name_error
from agent.eventlog import get_logger
from agent.limits import LimitError, check_name, check_qualified_name
from agent.tasks import cancel_and_wait
from agent.unixsock import SUN_PATH_MAX, dial, ensure_private_dir

log = get_logger("hwagent.devicemanager")

DEVICE_PLUGIN_TYPE = "DevicePlugin"


class WatcherRejected(Exception):
    pass


def validate_info(info: reg_pb.PluginInfo, registration_socket: str) -> tuple[str, str]:
    """(resource, DevicePlugin socket path) from GetInfo, or WatcherRejected."""
    try:
        check_name("resource_name", info.name)
        check_qualified_name("resource_name", info.name)
        check_name("version", info.type)
        for v in info.supported_versions[:16]:
            check_name("version", v)
        if len(os.fsencode(info.endpoint)) > SUN_PATH_MAX:
            raise LimitError("endpoint", f"endpoint is longer than the {SUN_PATH_MAX} bytes a socket address holds")
    except LimitError as e:
        raise WatcherRejected(str(e)) from None
    if info.type != DEVICE_PLUGIN_TYPE:
        raise WatcherRejected(f"plugin type {info.type!r} is not handled by hwagent (only {DEVICE_PLUGIN_TYPE!r})")
    if API_VERSION not in info.supported_versions:
        raise WatcherRejected(
            f"none of the plugin's versions {list(info.supported_versions)[:16]} is supported (need {API_VERSION!r})"
        )
    err = extended_resource_name_error(info.name)
    if err:
        raise WatcherRejected(f"the ResourceName {info.name!r} is invalid: {err}")
    endpoint = info.endpoint or registration_socket
    if "\x00" in endpoint or not endpoint.startswith("/"):
        raise WatcherRejected(f"endpoint {endpoint!r} must be an absolute path")
    if ".." in endpoint.split("/") or os.path.normpath(endpoint) != endpoint:
        raise WatcherRejected(f"endpoint {endpoint!r} must be a normalized path without '..'")
    try:
        if not stat.S_ISSOCK(os.lstat(endpoint).st_mode):
            raise WatcherRejected(f"endpoint {endpoint!r} is not a unix socket")
    except FileNotFoundError:
        raise WatcherRejected(f"endpoint {endpoint!r} does not exist") from None
    return info.name, endpoint


@dataclass
class _Seen:
    identity: tuple[int, int]  # (inode, ctime_ns): a recreated socket is a new plugin
    resource: str | None = None
    endpoint: str | None = None
    failures: int = 0
    retry_at: float = 0.0


class PluginWatcher:
    def __init__(
        self,
        manager: PluginRegistry,
        directory: Path,
        *,
        poll_seconds: float = 1.0,
        dial_timeout: float = 10.0,
        getinfo_timeout: float = 1.0,
        notify_timeout: float = 5.0,
    ) -> None:
        self.manager = manager
        self.directory = directory
        self.poll = poll_seconds
        self.dial_timeout = dial_timeout
        self.getinfo_timeout = getinfo_timeout
        self.notify_timeout = notify_timeout
        self._seen: dict[str, _Seen] = {}
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        ensure_private_dir(self.directory)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="plugin-watcher")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        while True:
            try:
                await self.scan()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one bad scan must not stop watching
                log.exception("plugin watcher scan failed", dir=self.directory)
            await asyncio.sleep(self.poll)

    def _sockets(self) -> dict[str, tuple[int, int]]:
        found = {}
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return {}
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISSOCK(st.st_mode):
                found[entry.path] = (st.st_ino, st.st_ctime_ns)
        return found

    async def scan(self) -> None:
        """One reconcile pass (public so tests can drive it without waiting)."""
        current = self._sockets()
        for path, seen in list(self._seen.items()):
            if current.get(path) != seen.identity:
                del self._seen[path]
                if seen.resource and seen.endpoint:
                    log.info("plugin socket removed", path=path, resource=seen.resource)
                    await self.manager.deregister(seen.resource, seen.endpoint)
        now = time.monotonic()
        for path, identity in sorted(current.items()):
            known = self._seen.get(path)
            if known is None:
                known = self._seen[path] = _Seen(identity)
            elif known.resource is not None or now < known.retry_at:
                continue
            await self._register(path, known)

    async def _register(self, path: str, seen: _Seen) -> None:
        # a PluginInfo is a few names: a plugin cannot make the host read megabytes
        async with dial(path, "pluginregistration", aio=True) as channel:
            stub = reg_grpc.RegistrationStub(channel)
            try:
                await asyncio.wait_for(channel.channel_ready(), self.dial_timeout)
                info = await stub.GetInfo(reg_pb.InfoRequest(), timeout=self.getinfo_timeout)
            except (asyncio.TimeoutError, grpc.aio.AioRpcError) as e:
                self._failed(path, seen, f"GetInfo failed: {e}")
                return
            bounded = len(info.name) <= 512
            REGISTRATIONS.labels(
                resource=info.name if bounded and extended_resource_name_error(info.name) is None else "_invalid_"
            ).inc()
            try:
                resource, endpoint = validate_info(info, path)
                await self.manager.register(resource, endpoint)
            except (WatcherRejected, AllocationError) as e:
                self._failed(path, seen, str(e))
                await self._notify(stub, path, False, str(e))
                return
            if not await self._notify(stub, path, True, ""):
                await self.manager.deregister(resource, endpoint)
                self._failed(path, seen, "NotifyRegistrationStatus failed")
                return
            seen.resource, seen.endpoint, seen.failures = resource, endpoint, 0
            log.info("plugin watcher registered", path=path, resource=resource, endpoint=endpoint)

    async def _notify(self, stub: reg_grpc.RegistrationStub, path: str, ok: bool, error: str) -> bool:
        try:
            await stub.NotifyRegistrationStatus(
                reg_pb.RegistrationStatus(plugin_registered=ok, error=error), timeout=self.notify_timeout
            )
            return True
        except grpc.aio.AioRpcError as e:
            log.warning("plugin notify failed", path=path, error=e.details())
            return False

    def _failed(self, path: str, seen: _Seen, reason: str) -> None:
        seen.failures += 1
        delay = min(2.0 ** (seen.failures - 1), 60.0) * self.poll
        seen.retry_at = time.monotonic() + delay
        log.warning("plugin watcher registration failed", path=path, error=reason, retry_in_s=round(delay, 1))
