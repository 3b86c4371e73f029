"""The [daemon] config section: where hwagent keeps its files and how it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DEFAULT_ROOT_DIR = "/var/lib/hwagent"
#: 9464 is registered for "Prometheus exporters"-style agents no other common
#: node component uses (node_exporter 9100, kubelet 10250/10255, cAdvisor 8080).
DEFAULT_METRICS_ADDRESS = "127.0.0.1:9464"


@dataclass(frozen=True)
class DaemonConfig:
    #: every file and socket hwagent creates lives under this directory
    root_dir: str = DEFAULT_ROOT_DIR
    #: auto: kubelet mode when the kubelet's registration socket exists
    mode: Literal["auto", "standalone", "kubelet"] = "auto"
    #: the kubelet's root dir (for kubelet.sock and plugins_registry in kubelet mode)
    kubelet_root_dir: str = "/var/lib/kubelet"
    metrics_address: str = DEFAULT_METRICS_ADDRESS
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    sysfs_root: str = "/sys"
    procfs_root: str = "/proc"
    cgroup_root: str = "/sys/fs/cgroup"

    def validate(self) -> None:
        host, sep, port = self.metrics_address.rpartition(":")
        if not sep or not port.isdigit() or not (0 <= int(port) <= 65535):
            raise ValueError(f"metrics_address must be HOST:PORT, got {self.metrics_address!r}")
        if not self.root_dir.startswith("/"):
            raise ValueError(f"root_dir must be an absolute path, got {self.root_dir!r}")
