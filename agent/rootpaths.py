"""Every path under hwagent's root dir, and the kubelet's that hwagent dials, named in one place.

The daemon binds these sockets and writes these files; the CLI and the tests
find them again. When each side spelled a path on its own, one name came to
mean three sockets and a rename had to be hunted across the tree; here each
socket has a name of its own and docs/daemon.md lists them all. Pure functions
of their arguments (a config's override, when it has one, wins): nothing here
reads a config or touches the disk, so every layer may import it.

    <root>/status.sock                           status API, gRPC (programs)
    <root>/status-http.sock                      the same answers as HTTP/JSON, root only (`hwagent status`,
                                                 `cpus`, `memory`, `resources`)
    <root>/admission.sock                        admission API, gRPC (programs)
    <root>/cli.sock                              the CLI's HTTP/JSON API (`hwagent launch`, `ps`, ...)
    <root>/manifests/                            static pod manifests
    <root>/device-plugins/registration.sock      device-plugin Registration service (standalone host)
    <root>/device-plugins/hwagent_device_checkpoint  the device host's snapshot (+ .wal journal)
    <root>/plugins_registry/                     the host's plugin-watcher directory
    <root>/pod-resources/pod-resources.sock      pod-resources v1 (standalone)
    <root>/cpu/                                  the CPU policy's checkpoint and journal
    <root>/cpu/qrm_cpu_plugin_dynamic.sock       the CPU policy's ResourcePlugin socket (standalone)
    <root>/workloads/pods/                       the admission registry, one file per pod
    <root>/runtime/                              the runtime's record of each pod
    <root>/logs/                                 container logs
    <root>/pressure/evictions.jsonl              the eviction record
"""

from __future__ import annotations

import os

#: typing is not imported at run time; pathlib is imported on first use (``_path``): the CLI's
#: light commands import this module for its constants, and pathlib is ~3 ms of their start-up
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "DEFAULT_ROOT_DIR", "DEFAULT_LOCK_DIR", "STATUS_SOCKET", "STATUS_HTTP_SOCKET", "ADMISSION_SOCKET", "CLI_SOCKET", "MANIFESTS", "DEVICE_PLUGINS", "REGISTRATION_SOCKET",
    "DEVICE_CHECKPOINT", "PLUGINS_REGISTRY", "POD_RESOURCES", "POD_RESOURCES_SOCKET", "CPU", "CPU_SOCKET",
    "WORKLOADS_STATE", "RUNTIME_STATE", "LOGS", "EVICTION_RECORD", "KUBELET_SOCKET", "HostPaths",
    "status_socket", "status_http_socket", "admission_socket", "cli_socket", "manifest_dir", "cpu_dir", "device_host",
    "kubelet_device_plugins", "kubelet_registration_socket", "kubelet_plugins_registry",
    "kubelet_pod_resources_socket",
]

StrPath = str | os.PathLike[str]


def _path(p: StrPath) -> Path:
    from pathlib import Path

    return Path(p)

#: ``[daemon] root_dir``'s default (agent.daemonconfig); here so the CLI finds it without the config loader
DEFAULT_ROOT_DIR = "/var/lib/hwagent"
#: ``[daemon] lock_dir``'s default: machine-wide, under no root dir: every daemon on the machine
#: must look in the same place to see the others' claims (agent.daemon.claim), and the CLI finds
#: the running daemon's root dir and config there (agent.daemon.running). tmpfs: a reboot, which
#: ends every holder, starts it empty.
DEFAULT_LOCK_DIR = "/run/hwagent/locks"
STATUS_SOCKET = "status.sock"
#: the status API again, as HTTP/1.1 + JSON for the CLI (agent.status.httpapi): root's alone, as status.sock is
STATUS_HTTP_SOCKET = "status-http.sock"
ADMISSION_SOCKET = "admission.sock"
#: the admission API again, as HTTP/1.1 + JSON for the CLI (agent.workloads.cliapi)
CLI_SOCKET = "cli.sock"
MANIFESTS = "manifests"
DEVICE_PLUGINS = "device-plugins"
#: the device host's Registration socket inside DEVICE_PLUGINS ([devicemanager] socket_name)
REGISTRATION_SOCKET = "registration.sock"
DEVICE_CHECKPOINT = "hwagent_device_checkpoint"
PLUGINS_REGISTRY = "plugins_registry"
POD_RESOURCES = "pod-resources"
POD_RESOURCES_SOCKET = "pod-resources.sock"
CPU = "cpu"
#: the CPU policy's ResourcePlugin socket ([cpu] socket_name)
CPU_SOCKET = "qrm_cpu_plugin_dynamic.sock"
WORKLOADS_STATE: tuple[str, ...] = ("workloads", "pods")
RUNTIME_STATE = "runtime"
LOGS = "logs"
EVICTION_RECORD: tuple[str, ...] = ("pressure", "evictions.jsonl")
#: the kubelet's own socket name, in its device-plugins/ and pod-resources/ dirs
KUBELET_SOCKET = "kubelet.sock"


def status_socket(root: StrPath) -> Path:
    return _path(root) / STATUS_SOCKET


def status_http_socket(root: StrPath) -> Path:
    return _path(root) / STATUS_HTTP_SOCKET


def admission_socket(root: StrPath, override: str = "") -> Path:
    """``[workloads] socket_path`` when set, else ``<root>/admission.sock``."""
    return _path(override) if override else _path(root) / ADMISSION_SOCKET


def cli_socket(root: StrPath) -> Path:
    """``<root>/cli.sock``: always under the root dir, so the CLI finds it from ``[daemon] root_dir`` alone."""
    return _path(root) / CLI_SOCKET


def manifest_dir(root: StrPath, override: str = "") -> Path:
    """``[workloads] manifest_dir`` when set, else ``<root>/manifests``."""
    return _path(override) if override else _path(root) / MANIFESTS


def cpu_dir(root: StrPath) -> Path:
    return _path(root) / CPU


class HostPaths:
    """Where the standalone device-plugin host listens and keeps its state.

    A plain value class rather than a dataclass: every CLI command imports this
    module, and ``dataclasses`` (with ``inspect`` behind it) was ~4 ms of a
    ``hwagent launch``'s start-up (bench/cli.py)."""

    __slots__ = ("plugins_dir", "registration_socket", "plugins_registry", "pod_resources_socket", "checkpoint")

    def __init__(self, *, plugins_dir: Path, registration_socket: Path, plugins_registry: Path,
                 pod_resources_socket: Path, checkpoint: Path) -> None:
        self.plugins_dir = plugins_dir
        self.registration_socket = registration_socket
        self.plugins_registry = plugins_registry
        self.pod_resources_socket = pod_resources_socket
        self.checkpoint = checkpoint

    def _values(self) -> tuple[Path, ...]:
        return tuple(getattr(self, f) for f in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HostPaths) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "HostPaths(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__) + ")"


def device_host(
    root: StrPath,
    *,
    plugins_dir: str = "",
    socket_name: str = REGISTRATION_SOCKET,
    plugins_registry: str = "",
    pod_resources_socket: str = "",
    checkpoint_name: str = DEVICE_CHECKPOINT,
) -> HostPaths:
    """The host's paths; each keyword is its ``[devicemanager]`` override ("" = under ``root``)."""
    base = _path(plugins_dir) if plugins_dir else _path(root) / DEVICE_PLUGINS
    return HostPaths(
        plugins_dir=base,
        registration_socket=base / socket_name,
        plugins_registry=_path(plugins_registry) if plugins_registry else _path(root) / PLUGINS_REGISTRY,
        pod_resources_socket=(
            _path(pod_resources_socket) if pod_resources_socket else _path(root) / POD_RESOURCES / POD_RESOURCES_SOCKET
        ),
        checkpoint=base / checkpoint_name,
    )


def kubelet_device_plugins(kubelet_root: StrPath) -> Path:
    return _path(kubelet_root) / DEVICE_PLUGINS


def kubelet_registration_socket(kubelet_root: StrPath) -> Path:
    """The kubelet's device-plugin Registration socket (its presence means kubelet mode)."""
    return kubelet_device_plugins(kubelet_root) / KUBELET_SOCKET


def kubelet_plugins_registry(kubelet_root: StrPath) -> Path:
    return _path(kubelet_root) / PLUGINS_REGISTRY


def kubelet_pod_resources_socket(kubelet_root: StrPath) -> Path:
    return _path(kubelet_root) / POD_RESOURCES / KUBELET_SOCKET
