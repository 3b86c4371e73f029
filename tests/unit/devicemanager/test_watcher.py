"""The plugin-watcher's GetInfo answer is bounded like every other input."""

from __future__ import annotations

import pytest

from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.devicemanager.watcher import WatcherRejected, validate_info


@pytest.mark.parametrize("info", [
    reg_pb.PluginInfo(type="DevicePlugin", name="example.com/" + "r" * 3_000_000, supported_versions=["v1beta1"]),
    reg_pb.PluginInfo(type="D" * 100_000, name="example.com/r", supported_versions=["v1beta1"]),
    reg_pb.PluginInfo(type="DevicePlugin", name="example.com/r", supported_versions=["v" * 100_000]),
    reg_pb.PluginInfo(type="DevicePlugin", name="example.com/r", supported_versions=["v1beta1"],
                      endpoint="/" + "e" * 200),
])
def test_oversized_plugin_info_is_rejected_with_a_short_message(info):
    with pytest.raises(WatcherRejected) as e:
        validate_info(info, "/run/reg.sock")
    assert len(str(e.value)) < 300
