"""Kubelet mode: the DRA driver's kubelet plugin, as status shows it.

The plugin (``agent.dra.kubeletplugin``) owns its servers and the kubelet's
registration verdict; status reads a plain snapshot of them when it answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from agent.contracts.component import HandleKey

__all__ = ["DRAKubeletPluginView", "DRA_KUBELET_PLUGIN"]


class DRAKubeletPluginView(Protocol):
    def state(self) -> Mapping[str, Any]:
        """driver, endpoint, registration (socket paths), registered (None until the kubelet
        reported, then its verdict), error (the kubelet's), prepare_calls, health_streams."""


#: agent.dra.kubeletplugin.component (kubelet mode, [dra] on)
DRA_KUBELET_PLUGIN: HandleKey[DRAKubeletPluginView] = HandleKey("dra_kubelet_plugin")
