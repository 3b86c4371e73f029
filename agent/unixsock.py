"""gRPC on a unix socket: serving it the way every hwagent server needs it, and dialling it.

The device-plugin host, each built-in device plugin, pod-resources and the CPU
plugin all bind sockets in directories other processes also write to. One
routine makes the same promises for all of them: the path fits in sun_path, a
stale *socket* from an earlier run is replaced but any other file is left alone
(an error, never a silent unlink), and the socket is owner-only, since anyone
who can connect can allocate devices and CPUs.

Every client channel is dialled here too (``dial``), with its message limits
explicit and mirrored from the server's (``agent.limits.GRPC_MESSAGE_LIMITS``):
a channel left at gRPC's default accepts 4 MiB, which `hwagent ps` outgrew at
about 2,800 pods while the server would have sent more.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, overload

import grpc

from agent.limits import GRPC_MESSAGE_LIMITS

__all__ = ["SUN_PATH_MAX", "channel_options", "dial", "dial_target", "ensure_private_dir", "serve_unix"]

#: sizeof(sockaddr_un.sun_path) - 1 for the terminating NUL
SUN_PATH_MAX = 107


def dial_target(socket_path: str | os.PathLike[str]) -> str:
    """The gRPC target for a client of ``socket_path``, made absolute first.

    gRPC reads ``unix://root/x.sock`` as an authority ("root") plus a path and
    refuses it with a bare UNKNOWN; a path relative to where the operator stands
    (``--root-dir root``) must be resolved before it is dialled.
    """
    return f"unix:{os.path.abspath(socket_path)}"


def channel_options(api: str, *, receive: int | None = None) -> list[tuple[str, Any]]:
    """A client's options for ``api`` (a key of GRPC_MESSAGE_LIMITS): it receives as much
    as that server sends and sends as much as it receives. ``receive`` overrides the
    first for a peer that is not hwagent's server (a third-party device plugin)."""
    limits = GRPC_MESSAGE_LIMITS[api]
    return [
        ("grpc.max_receive_message_length", limits.send if receive is None else receive),
        ("grpc.max_send_message_length", limits.receive),
    ]


@overload
def dial(socket_path: str | os.PathLike[str], api: str, *, aio: Literal[True], receive: int | None = None,
         options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel: ...
@overload
def dial(socket_path: str | os.PathLike[str], api: str, *, aio: Literal[False] = False, receive: int | None = None,
         options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel: ...
def dial(socket_path: str | os.PathLike[str], api: str, *, aio: bool = False, receive: int | None = None,
         options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel | grpc.aio.Channel:
    """An insecure channel to the unix socket ``socket_path`` speaking ``api``
    (``channel_options``), blocking (the CLI) or ``aio`` (the daemon)."""
    opts = channel_options(api, receive=receive) + list(options)
    if aio:
        return grpc.aio.insecure_channel(dial_target(socket_path), options=opts)
    return grpc.insecure_channel(dial_target(socket_path), options=opts)


def ensure_private_dir(directory: Path) -> None:
    """Create ``directory`` owner-only when missing; an existing one keeps the
    mode the daemon or the operator gave it (the sockets are 0600 anyway)."""
    if not directory.is_dir():
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask


async def serve_unix(server: grpc.aio.Server, socket_path: Path, mode: int = 0o600) -> None:
    """Bind ``server`` on ``socket_path`` (replacing a stale socket) and start it."""
    path = Path(socket_path)
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise ValueError(f"socket path {path} is longer than the {SUN_PATH_MAX} bytes a unix socket address holds")
    ensure_private_dir(path.parent)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise OSError(f"{path} exists and is not a socket; refusing to replace it")
        path.unlink()  # stale socket from an earlier run
    if server.add_insecure_port(f"unix:{path}") == 0:
        raise OSError(f"cannot bind unix socket {path}")
    await server.start()
    os.chmod(path, mode)
