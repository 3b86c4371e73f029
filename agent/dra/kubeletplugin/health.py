"""``DRAResourceHealth.NodeWatchResources``: each published device's health, streamed to the kubelet.

The source is what the device plugins already know (``DEVICE_PLUGINS``): a
device is Unhealthy when its rule says so (driver unbound or changed) or the
health board holds a mark on it (kernel errors, probes), with the reason as
the message. Devices are named as in the ResourceSlices (pool per resource,
``agent.dra.slices``). The stream sends every device first, then, when
something changed, the devices that changed; a device that disappeared
(hot-unplug, its resource gone) is sent once as Unknown and then forgotten.

The plugins' state is read every ``interval_s`` (a read of in-memory values,
no I/O): the board does not notify listeners, and rule-driven health changes
come from hotplug, so one periodic comparison covers both.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from agent.api.drahealth.v1 import api_pb2 as v1_pb
from agent.api.drahealth.v1 import api_pb2_grpc as v1_grpc
from agent.api.drahealth.v1alpha1 import api_pb2 as v1alpha1_pb
from agent.api.drahealth.v1alpha1 import api_pb2_grpc as v1alpha1_grpc
from agent.contracts.plugins import PluginState
from agent.dra.slices import dra_device_name, pool_name

__all__ = ["HEALTHY", "UNHEALTHY", "UNKNOWN", "DeviceKey", "health_map", "changes", "DRAHealthServicer",
           "add_health_services"]

HEALTHY, UNHEALTHY, UNKNOWN = "HEALTHY", "UNHEALTHY", "UNKNOWN"
#: (pool name, device name) as in the ResourceSlice
DeviceKey = tuple[str, str]


def health_map(states: Sequence[PluginState], node_name: str) -> dict[DeviceKey, tuple[str, str]]:
    """(pool, device) -> (HEALTHY|UNHEALTHY, message) for every device the plugins offer."""
    out: dict[DeviceKey, tuple[str, str]] = {}
    for st in states:
        pool = pool_name(node_name, st.resource)
        for d in st.devices:
            out[(pool, dra_device_name(d.id))] = (HEALTHY, "") if d.healthy else (UNHEALTHY, d.reason)
    return out


def changes(before: Mapping[DeviceKey, tuple[str, str]], after: Mapping[DeviceKey, tuple[str, str]]
            ) -> dict[DeviceKey, tuple[str, str]]:
    """What to send: devices new or changed, and the ones gone as UNKNOWN."""
    out = {k: v for k, v in after.items() if before.get(k) != v}
    out.update({k: (UNKNOWN, "the device is no longer offered") for k in before if k not in after})
    return out


class DRAHealthServicer:
    """One API version's NodeWatchResources; every stream polls the same source."""

    def __init__(self, pb: ModuleType, states: Callable[[], Sequence[PluginState]], node_name: str,
                 interval_s: float = 1.0) -> None:
        self.pb = pb
        self._states = states
        self.node_name = node_name
        self.interval_s = interval_s
        #: open streams now (status and tests)
        self.streams = 0

    def _response(self, entries: Mapping[DeviceKey, tuple[str, str]], now: int) -> Any:
        pb = self.pb
        return pb.NodeWatchResourcesResponse(devices=[
            pb.DeviceHealth(device=pb.DeviceIdentifier(pool_name=pool, device_name=dev),
                            health=pb.HealthStatus.Value(status), last_updated_time=now, message=message)
            for (pool, dev), (status, message) in sorted(entries.items())
        ])

    async def NodeWatchResources(self, request, context) -> AsyncIterator[Any]:
        self.streams += 1
        try:
            last = health_map(self._states(), self.node_name)
            yield self._response(last, int(time.time()))
            while True:
                await asyncio.sleep(self.interval_s)
                now = health_map(self._states(), self.node_name)
                diff = changes(last, now)
                if diff:
                    last = now
                    yield self._response(diff, int(time.time()))
        finally:
            self.streams -= 1


def add_health_services(server: Any, states: Callable[[], Sequence[PluginState]], node_name: str,
                        interval_s: float = 1.0) -> dict[str, DRAHealthServicer]:
    """Both DRAResourceHealth versions (v1alpha1, the kubelet's 1.34 one, and v1) on ``server``."""
    out = {"v1alpha1": DRAHealthServicer(v1alpha1_pb, states, node_name, interval_s),
           "v1": DRAHealthServicer(v1_pb, states, node_name, interval_s)}
    v1alpha1_grpc.add_DRAResourceHealthServicer_to_server(out["v1alpha1"], server)
    v1_grpc.add_DRAResourceHealthServicer_to_server(out["v1"], server)
    return out
