"""Run-option merging, endpoint-name rules and the [devicemanager] section."""

from __future__ import annotations

import pytest

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.config import ConfigError, loads
from agent.contracts.devices import Device, ResourceDevices, merge_run_options
from agent.devicemanager.registration import endpoint_name_error, version_error


def test_merge_first_wins_and_cdi_deduplicated():
    """TestDeviceRunContainerOptions."""
    r1 = pb.ContainerAllocateResponse(
        envs={"A": "1", "SHARED": "first"}, annotations={"k": "x"},
        mounts=[pb.Mount(container_path="/m", host_path="/h1")],
        devices=[pb.DeviceSpec(container_path="/dev/x", host_path="/dev/x1", permissions="rw")],
        cdi_devices=[pb.CDIDevice(name="v.com/c=1"), pb.CDIDevice(name="v.com/c=2")],
    )
    r2 = pb.ContainerAllocateResponse(
        envs={"B": "2", "SHARED": "second"}, annotations={"k": "y"},
        mounts=[pb.Mount(container_path="/m", host_path="/h2")],
        devices=[pb.DeviceSpec(container_path="/dev/x", host_path="/dev/x2")],
        cdi_devices=[pb.CDIDevice(name="v.com/c=2"), pb.CDIDevice(name="w.com/d=1")],
    )
    opts = merge_run_options([("r1", r1), ("r2", r2)])
    assert opts.envs == {"A": "1", "SHARED": "first", "B": "2"}
    assert opts.annotations == {"k": "x"}
    assert [m.host_path for m in opts.mounts] == ["/h1"]
    assert [d.host_path for d in opts.devices] == ["/dev/x1"]
    assert opts.cdi_devices == ("v.com/c=1", "v.com/c=2", "w.com/d=1")
    assert merge_run_options([("r", pb.ContainerAllocateResponse())]).envs == {}


def test_snapshot_counts_and_health_strings():
    d = pb.Device(ID="x", health="healthy")  # not exactly "Healthy"
    assert Device.from_pb(d) == Device("x", False, ())
    d2 = pb.Device(ID="y", health="Healthy", topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=1), pb.NUMANode(ID=0)]))
    assert Device.from_pb(d2) == Device("y", True, (0, 1))
    res = ResourceDevices.from_snapshot([Device.from_pb(d), Device.from_pb(d2)])
    assert (res.capacity, res.allocatable) == (2, 1)
    assert res.all_unhealthy().allocatable == 0 and res.all_unhealthy().capacity == 2


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "/abs.sock", "../x", "x\x00y", "n" * 256])
def test_bad_endpoint_names(name):
    assert endpoint_name_error(name)


@pytest.mark.parametrize("name", ["p.sock", "nvidia-gpu.sock", "..hidden", "a b"])
def test_plain_endpoint_names(name):
    assert endpoint_name_error(name) is None


def test_version_check():
    assert version_error("v1beta1") is None
    assert "not supported" in version_error("v1")


def test_config_section():
    cfg = loads("[devicemanager]\nstop_grace_seconds = 1\nsocket_name = 'x.sock'\n")
    assert cfg.sections["devicemanager"].stop_grace_seconds == 1.0
    for bad in ("socket_name = 'a/b'", "stop_grace_seconds = 0", "device_plugins_dir = 'rel'",
                "checkpoint_name = 'registration.sock'", "nope = 1"):
        with pytest.raises(ConfigError, match="devicemanager"):
            loads(f"[devicemanager]\n{bad}\n")
