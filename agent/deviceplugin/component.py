"""Daemon factory for the built-in device plugins (kept free of grpc imports
so that ``hwagent run`` starts fast; the plugins module is loaded on demand).

Where the plugins register:
- kubelet mode: the kubelet's ``<kubelet_root_dir>/device-plugins/kubelet.sock``,
  sockets in that dir (the kubelet joins RegisterRequest.endpoint to it);
- standalone mode: hwagent's own device-plugin host, i.e. the
  ``[devicemanager]`` section's plugin dir and socket name when that section
  exists, else ``<root_dir>/device-plugins/registration.sock`` (``agent.rootpaths``).
``[devices] plugin_dir`` / ``registration_socket`` override both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.daemonconfig import DAEMON_SECTION
from agent.devices.config import DEVICES_SECTION
from agent.rootpaths import DEVICE_PLUGINS, REGISTRATION_SOCKET, kubelet_device_plugins, kubelet_registration_socket

__all__ = ["factory", "resolve_paths"]


def resolve_paths(config: Any, mode: str, root_dir: Path) -> tuple[Path, Path]:
    cfg = config[DEVICES_SECTION]
    daemon = config[DAEMON_SECTION]
    if mode == "kubelet":
        plugin_dir = kubelet_device_plugins(daemon.kubelet_root_dir)
        socket = kubelet_registration_socket(daemon.kubelet_root_dir).name
    else:
        host = config.sections.get("devicemanager")
        host_dir = getattr(host, "device_plugins_dir", "") if host is not None else ""
        plugin_dir = Path(host_dir) if host_dir else Path(root_dir) / DEVICE_PLUGINS
        socket = getattr(host, "socket_name", REGISTRATION_SOCKET) if host is not None else REGISTRATION_SOCKET
    if cfg.plugin_dir:
        plugin_dir = Path(cfg.plugin_dir)
    reg = Path(cfg.registration_socket) if cfg.registration_socket else plugin_dir / socket
    return plugin_dir, reg


def factory(ctx: Any):
    """``DevicePluginsComponent`` for the daemon, or None when ``[devices] enabled = false``."""
    cfg = ctx.config[DEVICES_SECTION]
    if not cfg.enabled:
        return None
    from agent.deviceplugin.plugins import DevicePluginsComponent

    plugin_dir, reg = resolve_paths(ctx.config, ctx.mode, ctx.root_dir)
    return DevicePluginsComponent(cfg, sysfs_root=ctx.config[DAEMON_SECTION].sysfs_root, plugin_dir=plugin_dir,
                               registration_socket=reg)
