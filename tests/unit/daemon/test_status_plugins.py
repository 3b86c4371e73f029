"""Kubelet mode: status and the resources view show the built-in device plugins
from the values the devices component hands out (``DevicePlugins.plugin_states``),
joined with the pod directory's device holders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agent.config import load
from agent.contracts import DaemonContext
from agent.contracts.plugins import PluginDeviceState, PluginState
from agent.contracts.poddirectory import DeviceHolder, PodDirectory
from agent.status.component import StatusComponent
from agent.status.views import Handles, resources_view
from agent.topology import synthetic

NIC = "example.com/nic"
NVME = "hwagent.io/nvme"


class Plugins:
    """A ``DevicePlugins`` that has nothing but values to give."""

    def __init__(self, states: Sequence[PluginState]) -> None:
        self.states = list(states)

    def plugin_states(self) -> Sequence[PluginState]:
        return self.states


class Pods:
    def __init__(self, current: PodDirectory) -> None:
        self.current = current
        self.last_error = ""

    def containers_for_pressure(self) -> list:
        return []


STATES = [
    PluginState(NVME, Path("/dp/hwagent-hwagent.io_nvme.sock"), (
        PluginDeviceState("0000:5e:00.0", True, "", 0),
        PluginDeviceState("0000:5f:00.0", False, "driver unbound", None),
    ), registered=True),
    PluginState(NIC, Path("/dp/hwagent-example.com_nic.sock"), (PluginDeviceState("eth1", True, "", 1),),
                registered=False, last_error="/k/kubelet.sock does not exist"),
]
HOLDER = DeviceHolder("default", "web", "app")
PODS = PodDirectory(devices={(NVME, "0000:5e:00.0"): HOLDER}, source="kubelet pod-resources")


def test_resources_view_reads_the_plugin_states():
    view = resources_view(Handles(plugins=Plugins(STATES), pods=Pods(PODS)))
    assert sorted(view["resources"]) == [NIC, NVME]
    nvme = view["resources"][NVME]
    assert (nvme["capacity"], nvme["allocatable"], nvme["allocated"]) == (2, 1, 1)
    assert nvme["endpoints"] == [{"socket": "/dp/hwagent-hwagent.io_nvme.sock", "state": "registered",
                                  "stop_time": None, "error": ""}]
    assert nvme["devices"] == [
        {"id": "0000:5e:00.0", "health": "Healthy", "reason": "", "numa": [0], "allocated": True,
         "holder": {"namespace": "default", "pod": "web", "container": "app"}},
        {"id": "0000:5f:00.0", "health": "Unhealthy", "reason": "driver unbound", "numa": [], "allocated": False,
         "holder": None},
    ]
    nic = view["resources"][NIC]
    assert nic["endpoints"][0]["state"] == "unregistered"
    assert nic["endpoints"][0]["error"] == "/k/kubelet.sock does not exist"
    assert (nic["capacity"], nic["allocatable"], nic["allocated"]) == (1, 1, 0)
    assert view["allocations"][0]["resource"] == NVME and view["allocations"][0]["devices"] == ["0000:5e:00.0"]


def test_status_counts_each_plugins_devices(tmp_path):
    comp = StatusComponent()
    comp._ctx = DaemonContext(load(None), tmp_path, synthetic(), mode="kubelet")
    comp._handles = Handles(plugins=Plugins(STATES), pods=Pods(PODS))
    got = {r.name: (r.capacity, r.allocatable, r.allocated, r.source) for r in comp.status().resources}
    assert got == {NIC: (1, 1, 0, "plugin"), NVME: (2, 1, 1, "plugin")}
