"""The [devicemanager] config section: the device-plugin host's knobs."""

from __future__ import annotations

from dataclasses import dataclass

from agent.rootpaths import DEVICE_CHECKPOINT, REGISTRATION_SOCKET
from agent.config import SectionKey


@dataclass(frozen=True)
class DeviceManagerConfig:
    #: run the host at all (it only ever runs in standalone mode)
    enabled: bool = True
    #: directory of plugin sockets; empty = <root_dir>/device-plugins
    device_plugins_dir: str = ""
    #: file name of hwagent's Registration socket inside device_plugins_dir
    socket_name: str = REGISTRATION_SOCKET
    #: plugin-watcher directory; empty = <root_dir>/plugins_registry
    plugins_registry_dir: str = ""
    #: how often the plugin-watcher directory is rescanned (no inotify needed)
    watcher_poll_seconds: float = 1.0
    #: pod-resources v1 socket; empty = <root_dir>/pod-resources/pod-resources.sock
    pod_resources_socket: str = ""
    #: checkpoint file name inside device_plugins_dir
    checkpoint_name: str = DEVICE_CHECKPOINT
    #: how long a resource whose last plugin went away is kept (kubelet: 5 min)
    stop_grace_seconds: float = 300.0
    #: PreStartContainer deadline (kubelet: 30 s)
    prestart_timeout_seconds: float = 30.0
    #: dialling a plugin socket, and GetDevicePluginOptions (kubelet dial: 10 s)
    dial_timeout_seconds: float = 10.0
    #: plugin-watcher GetInfo / NotifyRegistrationStatus deadlines (kubelet: 1 s / 5 s)
    getinfo_timeout_seconds: float = 1.0
    notify_timeout_seconds: float = 5.0
    #: Allocate / GetPreferredAllocation deadline (the kubelet has none; a hung
    #: plugin would block admission forever)
    allocate_timeout_seconds: float = 60.0

    def validate(self) -> None:
        for name in ("socket_name", "checkpoint_name"):
            value = getattr(self, name)
            if not value or "/" in value or value in (".", ".."):
                raise ValueError(f"{name} must be a plain file name, got {value!r}")
        for name in ("device_plugins_dir", "plugins_registry_dir", "pod_resources_socket"):
            value = getattr(self, name)
            if value and not value.startswith("/"):
                raise ValueError(f"{name} must be an absolute path, got {value!r}")
        for name in (
            "watcher_poll_seconds", "stop_grace_seconds", "prestart_timeout_seconds",
            "dial_timeout_seconds", "getinfo_timeout_seconds", "notify_timeout_seconds",
            "allocate_timeout_seconds",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.socket_name == self.checkpoint_name:
            raise ValueError("socket_name and checkpoint_name must differ")


#: ``config[DEVICEMANAGER_SECTION]``, the [devicemanager] section
DEVICEMANAGER_SECTION: SectionKey[DeviceManagerConfig] = SectionKey("devicemanager", DeviceManagerConfig)
