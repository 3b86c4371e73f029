"""The [daemon] config section: where hwagent keeps its files and how it serves.

In the bottom layer, beside ``agent.config``, not in ``agent.daemon``: every owner
reads it (root dir, sysfs and procfs roots, the kubelet's root), and an owner
must not import the daemon that assembles it.

Every default here is documented in docs/config.md; a test keeps the two equal.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from agent.config import SectionKey
from agent.rootpaths import DEFAULT_LOCK_DIR, DEFAULT_ROOT_DIR

__all__ = [
    "DAEMON_SECTION", "DEFAULT_LOCK_DIR", "DEFAULT_METRICS_ADDRESS", "DEFAULT_ROOT_DIR", "DaemonConfig", "parse_host_port",
]

#: 9464 is the port OpenTelemetry's Prometheus exporters default to for an
#: application's own metrics; no common node component listens there
#: (node_exporter 9100, kubelet 10250/10255, cAdvisor 8080). Localhost only by
#: default: a node agent should not expose itself until the operator says so.
DEFAULT_METRICS_ADDRESS = "127.0.0.1:9464"


def parse_host_port(address: str) -> tuple[str, int]:
    """"HOST:PORT" or "[v6]:PORT" -> (host, port). Port 0 asks the kernel for a free one.

    Raises ValueError with the reason; the host must be an IP literal or a name
    (an empty host would mean every interface, which nobody should get by a typo).
    """
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ValueError(f"must be HOST:PORT, got {address!r}")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"port must be 0-65535 in {address!r}")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError(f"unbalanced brackets in {address!r}")
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{host!r} in {address!r} is not an IPv6 address") from None
    elif ":" in host:
        raise ValueError(f"write an IPv6 address in brackets, e.g. [::1]:9464, got {address!r}")
    return host, int(port)


@dataclass(frozen=True)
class DaemonConfig:
    #: every file and socket hwagent creates lives under this directory
    root_dir: str = DEFAULT_ROOT_DIR
    #: where daemons claim their cgroup subtrees and CPUs (one daemon per subtree and per CPU);
    #: the same directory for every daemon on the machine
    lock_dir: str = DEFAULT_LOCK_DIR
    #: auto: kubelet mode when the kubelet's registration socket exists
    mode: Literal["auto", "standalone", "kubelet"] = "auto"
    #: the kubelet's root dir (for kubelet.sock and plugins_registry in kubelet mode)
    kubelet_root_dir: str = "/var/lib/kubelet"
    #: HOST:PORT of the /metrics and /healthz endpoint; port 0 picks a free port
    metrics_address: str = DEFAULT_METRICS_ADDRESS
    #: serve the series that name pods (namespace/pod/container labels): who runs what. Off by
    #: default: the endpoint asks for no credentials and any local user reaches loopback (the
    #: kubelet serves pod names only behind authn/authz); turn on where the port is closed to
    #: all but the scraper (docs/metrics.md, "Who can read it")
    metrics_pod_labels: bool = False
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    sysfs_root: str = "/sys"
    procfs_root: str = "/proc"
    #: how long one component may take to stop before shutdown moves on without it
    stop_timeout_seconds: float = 10.0

    def validate(self) -> None:
        try:
            parse_host_port(self.metrics_address)
        except ValueError as e:
            raise ValueError(f"metrics_address: {e}") from None
        for key in ("root_dir", "lock_dir", "kubelet_root_dir", "sysfs_root", "procfs_root"):
            value = getattr(self, key)
            if not value.startswith("/"):
                raise ValueError(f"{key}: must be an absolute path, got {value!r}")
        if self.root_dir.rstrip("/") == "":
            # the daemon walks its root dir at exit to report stray sockets
            raise ValueError("root_dir: must be a directory of its own, not /")
        if not 0 < self.stop_timeout_seconds <= 3600:
            raise ValueError(f"stop_timeout_seconds: must be in (0, 3600], got {self.stop_timeout_seconds}")


#: ``config[DAEMON_SECTION]``, the [daemon] section
DAEMON_SECTION: SectionKey[DaemonConfig] = SectionKey("daemon", DaemonConfig)
