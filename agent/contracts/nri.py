"""The NRI front (hwagent as a plugin of containerd / CRI-O), as status and other views see it.

The plugin (``agent.nri.component``) owns its connection to the runtime and the
record of what it decided; readers take a plain snapshot (``state()``) when they
answer, never the plugin's objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from agent.contracts.component import HandleKey

if TYPE_CHECKING:
    from agent.contracts import ActivePods

__all__ = ["NriPluginView", "NRI_PLUGIN", "NRI_PODS", "summary"]


class NriPluginView(Protocol):
    def state(self) -> Mapping[str, Any]:
        """socket, name ("90-hwagent"), connected, registered, runtime, runtime_version, sessions,
        last_error, pods, containers (known to the runtime), adjusted, failed (adjustments made /
        that could not be made since start), unadjusted (containers running without hwagent's
        adjustment now), updates (UpdateContainers pushed), kubelet_cpu_manager (what the kubelet's
        CPU-manager files said), placement_paused (why nothing is placed, with the fix; "" = placing)."""


def summary(st: Mapping[str, Any]) -> str:
    """One line for `hwagent status` (pure): the connection, then what the plugin did."""
    if st.get("registered"):
        conn = f"registered as {st.get('name', '')} with {st.get('runtime', '')} {st.get('runtime_version', '')}"
    elif st.get("connected"):
        conn = f"connected to {st.get('socket', '')}, registering"
    else:
        err = st.get("last_error") or "not connected"
        conn = f"waiting for the runtime at {st.get('socket', '')} ({err})"
    line = (f"{conn.strip()}; {st.get('pods', 0)} pods, {st.get('containers', 0)} containers known; "
            f"{st.get('adjusted', 0)} adjusted, {st.get('failed', 0)} refused, "
            f"{st.get('unadjusted', 0)} running unadjusted, {st.get('updates', 0)} updates pushed")
    # the kubelet's CPU manager is not none: nothing is placed (agent.kubelet.cpumanager)
    return line + (f"; PLACEMENT REFUSED: {st['placement_paused']}" if st.get("placement_paused") else "")


#: agent.nri.component ([nri] enabled, both modes)
NRI_PLUGIN: HandleKey[NriPluginView] = HandleKey("nri_plugin")
#: agent.nri.component: the pods the NRI front holds resources for, active while the runtime has them
#: (standalone mode joins them to the registry's in ``ACTIVE_PODS``, so residual cleanup keeps them)
NRI_PODS: HandleKey[ActivePods] = HandleKey("nri_pods")
