"""One owner per device: a resource rule's devices are offered through exactly one API, the
device plugins (``api = "device-plugin"``, the default) or DRA (``api = "dra"``), so no
device can be given to a container by the device manager and prepared for a claim too."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from agent.config import ConfigError, loads, section_defaults
from agent.contracts import DaemonContext
from agent.daemonconfig import DAEMON_SECTION, DaemonConfig
from agent.deviceplugin.plugins import DevicePluginsComponent
from agent.deviceplugin.server import socket_name
from agent.devices.config import DEVICES_SECTION, DevicesConfig, ResourceRule
from agent.dra.component import DraComponent
from agent.dra.config import DraConfig
from agent.topology.model import synthetic
from tests.unit.devices.fakesysfs import FakeSysfs

DRA_RES = "example.com/scratch"
DP_RES = "example.com/disk"


def _config(tmp_path) -> tuple[FakeSysfs, DevicesConfig]:
    fs = FakeSysfs(tmp_path / "sys")
    for i in range(4):
        fs.virtual_block(f"loop{i}", f"7:{i}")
    cfg = DevicesConfig(default_rules=False, hotplug=False, resources=(
        ResourceRule(name=DRA_RES, block_name=("loop0", "loop1"), api="dra"),
        ResourceRule(name=DP_RES, block_name=("loop2", "loop3")),
    ))
    return fs, cfg


def test_a_dra_resource_gets_no_device_plugin(tmp_path):
    """The device manager never sees a DRA resource's devices (no plugin registers them), and
    the DRA health stream still has their health."""
    fs, cfg = _config(tmp_path)
    svc = DevicePluginsComponent(cfg, sysfs_root=str(fs.root), plugin_dir=tmp_path / "dp",
                                 registration_socket=tmp_path / "dp" / "kubelet.sock", hotplug=False)

    async def run():
        await svc.start(DaemonContext(section_defaults(), tmp_path / "root", synthetic()))
        try:
            assert [s.resource for s in svc.plugin_states()] == [DP_RES]
            assert not (tmp_path / "dp" / socket_name(DRA_RES)).exists()
            assert [(s.resource, [d.id for d in s.devices]) for s in svc.dra_states()] == \
                [(DRA_RES, ["loop0", "loop1"])]
            assert all(d.healthy for s in svc.dra_states() for d in s.devices)
        finally:
            await svc.stop()

    asyncio.run(run())


def test_dra_offers_only_its_own_resources(tmp_path):
    """The DRA driver's devices (what claims are allocated and prepared from) are the DRA
    resource's only: a device-plugin resource's devices cannot be allocated to a claim."""
    fs, cfg = _config(tmp_path)
    comp = DraComponent(DraConfig())
    comp._ctx = SimpleNamespace(config={DEVICES_SECTION: cfg, DAEMON_SECTION: DaemonConfig(sysfs_root=str(fs.root))})
    node = comp.node_devices()
    assert sorted((d.resource, d.name) for d in node.devices) == [(DRA_RES, "loop0"), (DRA_RES, "loop1")]


def test_the_config_names_one_api_per_resource():
    rule = '[[devices.resources]]\nname = "example.com/scratch"\nblock_name = ["loop*"]\n'
    cfg = loads(rule + 'api = "dra"\n')
    assert cfg[DEVICES_SECTION].resources[0].api == "dra"
    assert loads(rule)[DEVICES_SECTION].resources[0].api == "device-plugin"
    with pytest.raises(ConfigError, match="api"):
        loads(rule + 'api = "both"\n')
