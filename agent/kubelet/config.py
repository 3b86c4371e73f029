"""The [kubelet] config section: pod awareness and Katalyst's eviction plugin in kubelet mode."""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import SectionKey

__all__ = ["KUBELET_SECTION", "KubeletConfig"]


@dataclass(frozen=True)
class KubeletConfig:
    #: read the kubelet's pod-resources API and kubepods tree to label signals by pod (kubelet mode only)
    pod_awareness: bool = True
    #: the kubelet's pod-resources socket; empty = <daemon.kubelet_root_dir>/pod-resources/kubelet.sock
    pod_resources_socket: str = ""
    #: seconds between refreshes of the pod directory
    refresh_s: float = 2.0
    #: where the kubelet keeps container logs (pods/ and containers/ name pods and containers)
    log_dir: str = "/var/log"
    #: serve Katalyst's EvictionPlugin v1alpha1 API (kubelet mode only)
    eviction_plugin: bool = True
    #: Katalyst's plugin registration directory (its --plugin-registration-dir)
    plugin_registration_dir: str = "/var/lib/katalyst/plugin-socks"
    #: the plugin's name in GetInfo and its socket's file name
    plugin_name: str = "hwagent-cpu-pressure"
    #: grace period hwagent asks for with the pods it names; -1 = the pod's own
    eviction_grace_period_s: int = -1
    #: GetEvictPods names pods holding a device hwagent marks unhealthy
    evict_on_unhealthy_device: bool = False

    def validate(self) -> None:
        if self.refresh_s <= 0:
            raise ValueError("refresh_s must be > 0")
        for key in ("log_dir", "plugin_registration_dir"):
            if not getattr(self, key).startswith("/"):
                raise ValueError(f"{key}: must be an absolute path, got {getattr(self, key)!r}")
        if self.pod_resources_socket and not self.pod_resources_socket.startswith("/"):
            raise ValueError(f"pod_resources_socket: must be an absolute path, got {self.pod_resources_socket!r}")
        if not self.plugin_name or "/" in self.plugin_name:
            raise ValueError(f"plugin_name: must be a non-empty file name, got {self.plugin_name!r}")
        if self.eviction_grace_period_s < -1:
            raise ValueError("eviction_grace_period_s must be >= -1")


#: ``config[KUBELET_SECTION]``, the [kubelet] section
KUBELET_SECTION: SectionKey[KubeletConfig] = SectionKey("kubelet", KubeletConfig)
