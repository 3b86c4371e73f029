"""hwagent's v1beta1 Registration service: where device plugins announce themselves.

Checks, in order (the registration counter is bumped before any of them, as the
kubelet does): API version, extended resource name, endpoint file name, the
socket itself; then the plugin is dialled and asked for its options before the
call returns, so a plugin that cannot be reached fails its Register call.

Unlike the kubelet we refuse endpoint names that could leave the
device-plugins directory (separators, ``..``, NUL, absolute paths), anything
that is not a unix socket (a symlink included), and a socket with more than one
hard link: a link made inside the directory to a socket elsewhere would pass
every name check while the plugin behind it lives outside.

A second Register for a (resource, socket) that is already connected replaces
the old endpoint once the new one answers, as the kubelet does: plugins
re-register that way after their own restarts.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import grpc

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from agent.devicemanager.types import PluginRegistry
from agent.devicemanager.metrics import REGISTRATIONS
from agent.contracts.devices import SUPPORTED_VERSIONS
from agent.devicemanager.selection import AllocationError
from agent.devices.names import extended_resource_name_error
from agent.eventlog import get_logger
from agent.grpcguard import new_server
from agent.limits import LimitError, check_name, check_qualified_name, shown
from agent.unixsock import ensure_private_dir, serve_unix

log = get_logger("hwagent.devicemanager")

#: sun_path is 108 bytes including the terminating NUL
MAX_SOCKET_PATH = 107


class RegistrationRejected(Exception):
    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT) -> None:
        super().__init__(message)
        self.code = code


def endpoint_name_error(name: str) -> str | None:
    """Why ``name`` is not a plain file name for a socket in the plugins dir."""
    if not name:
        return "endpoint is empty"
    if "\x00" in name:
        return "endpoint contains a NUL byte"
    if "/" in name:
        return "endpoint must be a file name in the device-plugins directory, not a path"
    if name in (".", ".."):
        return f"endpoint {name!r} is not a file name"
    if len(name.encode()) > 255:
        return "endpoint is longer than 255 bytes"
    return None


def version_error(version: str) -> str | None:
    if version in SUPPORTED_VERSIONS:
        return None
    return (
        f"requested API version {shown(version)} is not supported by hwagent. "
        f"Supported version is {SUPPORTED_VERSIONS[0]!r}"
    )


def socket_path_for(directory: Path, endpoint: str, reserved: set[str]) -> Path:
    """Validate ``endpoint`` and return the socket it names; raises RegistrationRejected."""
    err = endpoint_name_error(endpoint)
    if err:
        raise RegistrationRejected(err)
    if endpoint in reserved:
        raise RegistrationRejected(f"endpoint {endpoint!r} is reserved by hwagent")
    path = directory / endpoint
    if len(str(path).encode()) > MAX_SOCKET_PATH:
        raise RegistrationRejected(f"socket path {str(path)!r} is longer than {MAX_SOCKET_PATH} bytes")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise RegistrationRejected(
            f"endpoint {endpoint!r}: no socket at {path}", grpc.StatusCode.FAILED_PRECONDITION
        ) from None
    if not stat.S_ISSOCK(st.st_mode):
        raise RegistrationRejected(
            f"endpoint {endpoint!r}: {path} is not a unix socket", grpc.StatusCode.FAILED_PRECONDITION
        )
    if st.st_nlink > 1:
        raise RegistrationRejected(
            f"endpoint {endpoint!r}: {path} has {st.st_nlink} hard links; a plugin socket must be created "
            "in the device-plugins directory, not linked there",
            grpc.StatusCode.FAILED_PRECONDITION,
        )
    return path


def bounded_fields_error(request: pb.RegisterRequest) -> str | None:
    """The size bounds, checked before any rule that would echo a field back."""
    try:
        check_name("version", request.version)
        check_name("resource_name", request.resource_name)
        check_qualified_name("resource_name", request.resource_name)
        check_name("endpoint", request.endpoint)
    except LimitError as e:
        return str(e)
    return None


def status_code(err: AllocationError) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, err.code, grpc.StatusCode.UNKNOWN)


class RegistrationServicer(pb_grpc.RegistrationServicer):
    def __init__(self, manager: PluginRegistry, plugins_dir: Path, reserved: set[str]) -> None:
        self.manager = manager
        self.plugins_dir = plugins_dir
        self.reserved = reserved

    async def Register(self, request: pb.RegisterRequest, context: grpc.aio.ServicerContext) -> pb.Empty:
        name = request.resource_name
        too_long = bounded_fields_error(request)
        name_err = too_long or extended_resource_name_error(name)
        # bounded label set: a hostile caller must not mint series with junk names
        REGISTRATIONS.labels(resource=name if name_err is None else "_invalid_").inc()
        try:
            if too_long:
                raise RegistrationRejected(too_long)
            err = version_error(request.version)
            if err:
                raise RegistrationRejected(err)
            if name_err:
                raise RegistrationRejected(f"the ResourceName {name!r} is invalid: {name_err}")
            path = socket_path_for(self.plugins_dir, request.endpoint, self.reserved)
            await self.manager.register(name, str(path))
        except RegistrationRejected as e:
            log.warning("registration rejected", resource=shown(name), endpoint=shown(request.endpoint), error=str(e))
            await context.abort(e.code, str(e))
        except AllocationError as e:
            log.warning("registration failed", resource=name, endpoint=request.endpoint, error=str(e))
            await context.abort(status_code(e), str(e))
        log.info("registered", resource=name, endpoint=request.endpoint, version=request.version)
        return pb.Empty()


def prepare_socket_dir(directory: Path, keep: set[str]) -> list[str]:
    """Create the directory (owner-only) and remove stale sockets in it.

    Only sockets are removed (regular files such as the checkpoint, and
    directories, are left alone), like the kubelet's CleanupPluginDirectory.
    """
    ensure_private_dir(directory)
    removed = []
    for entry in os.scandir(directory):
        if entry.name in keep:
            continue
        try:
            if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                os.unlink(entry.path)
                removed.append(entry.name)
        except FileNotFoundError:
            continue
    if removed:
        log.info("stale sockets removed", dir=directory, names=",".join(sorted(removed)))
    return removed


class RegistrationServer:
    """The Registration gRPC server on ``<plugins_dir>/<socket_name>``."""

    def __init__(self, manager: PluginRegistry, plugins_dir: Path, socket_name: str, reserved: set[str]) -> None:
        self.manager = manager
        self.plugins_dir = plugins_dir
        self.socket_path = plugins_dir / socket_name
        self.reserved = reserved | {socket_name}
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        prepare_socket_dir(self.plugins_dir, keep=set())
        self._server = new_server("registration")
        pb_grpc.add_RegistrationServicer_to_server(
            RegistrationServicer(self.manager, self.plugins_dir, self.reserved), self._server
        )
        await serve_unix(self._server, self.socket_path)
        log.info("registration serving", socket=self.socket_path)

    @property
    def serving(self) -> bool:
        return self._server is not None and self.socket_path.exists()

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=1.0)
        try:
            if stat.S_ISSOCK(os.lstat(self.socket_path).st_mode):
                self.socket_path.unlink()
        except FileNotFoundError:
            pass
