"""systemd's readiness protocol (sd_notify(3)) over a plain AF_UNIX datagram socket.

The protocol is one datagram of ``KEY=VALUE`` lines to the socket named by
``$NOTIFY_SOCKET`` (a path, or ``@name`` for the abstract namespace). It is
small enough that a dependency (systemd-python, sdnotify) would cost more than
it saves, and a plain socket is what lets the tests play systemd with a real
socket of their own.

Notification is best effort by design: a lost datagram must never take the
daemon down, so send errors are logged, not raised.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from agent.eventlog import get_logger

__all__ = ["Notifier", "socket_address", "watchdog_interval"]

log = get_logger("hwagent.sdnotify")


def socket_address(value: str) -> str | bytes | None:
    """$NOTIFY_SOCKET -> an address for sendto(); None when unusable.

    ``@name`` is Linux's abstract namespace (a leading NUL byte on the wire).
    systemd also allows ``vsock:`` addresses, which this agent never runs under.
    """
    if not value:
        return None
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None


def watchdog_interval(environ: Mapping[str, str], pid: int) -> float | None:
    """Seconds between WATCHDOG=1 pings: half of $WATCHDOG_USEC, as sd_watchdog_enabled(3) advises.

    None when the watchdog is off, or when $WATCHDOG_PID names another process
    (the variables were inherited, the watchdog is not ours).
    """
    usec = environ.get("WATCHDOG_USEC", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    wpid = environ.get("WATCHDOG_PID", "")
    if wpid and (not wpid.isdigit() or int(wpid) != pid):
        return None
    return int(usec) / 1e6 / 2


class Notifier:
    """Sends sd_notify messages; every method is a no-op when systemd did not ask."""

    def __init__(self, address: str | bytes | None) -> None:
        self.address = address
        self._sock: socket.socket | None = None
        if address is not None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.setblocking(False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        env = os.environ if environ is None else environ
        raw = env.get("NOTIFY_SOCKET", "")
        address = socket_address(raw)
        if raw and address is None:
            log.warning("notify socket unsupported", notify_socket=raw, note="not notifying systemd")
        return cls(address)

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def send(self, **fields: str | int) -> bool:
        """Send one datagram of KEY=VALUE lines. True when it went out."""
        if self._sock is None or self.address is None:
            return False
        payload = "\n".join(f"{k}={_one_line(v)}" for k, v in fields.items()).encode()
        try:
            self._sock.sendto(payload, self.address)
        except OSError as e:
            log.warning("sd notify failed", error=e.strerror or str(e), fields=",".join(fields))
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        fields: dict[str, str | int] = {"READY": 1, "MAINPID": os.getpid()}
        if status:
            fields["STATUS"] = status
        return self.send(**fields)

    def status(self, text: str) -> bool:
        return self.send(STATUS=text)

    def watchdog(self) -> bool:
        return self.send(WATCHDOG=1)

    def stopping(self, status: str | None = None) -> bool:
        fields: dict[str, str | int] = {"STOPPING": 1}
        if status:
            fields["STATUS"] = status
        return self.send(**fields)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _one_line(value: str | int) -> str:
    # a newline inside a value would start a new (bogus) assignment
    return str(value).replace("\n", " ")
