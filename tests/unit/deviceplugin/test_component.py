"""The daemon factory: paths per mode, disabled by config, the component's
lifecycle with a hand-built DaemonContext (sockets created and removed,
the health board published)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.contracts import DEVICE_HEALTH
from agent.contracts import DaemonContext
from agent.config import loads
from agent.deviceplugin.component import factory, resolve_paths
from agent.deviceplugin.server import socket_name
from agent.topology.model import synthetic
from tests.unit.devices.fakesysfs import FakeSysfs


def _config(text: str = ""):
    return loads(text)


def test_paths_per_mode(tmp_path):
    cfg = _config('[daemon]\nkubelet_root_dir = "/k"\n')
    assert resolve_paths(cfg, "kubelet", tmp_path) == (Path("/k/device-plugins"), Path("/k/device-plugins/kubelet.sock"))
    plugin_dir, reg = resolve_paths(cfg, "standalone", tmp_path)
    assert plugin_dir == tmp_path / "device-plugins" and reg.parent == plugin_dir
    if "devicemanager" in cfg.sections:  # hwagent's own host: its socket name
        assert reg.name == cfg.sections["devicemanager"].socket_name
    cfg = _config('[devices]\nplugin_dir = "/p"\nregistration_socket = "/r.sock"\n')
    assert resolve_paths(cfg, "kubelet", tmp_path) == (Path("/p"), Path("/r.sock"))


def test_disabled_by_config(tmp_path):
    ctx = DaemonContext(_config("[devices]\nenabled = false\n"), tmp_path, synthetic())
    assert factory(ctx) is None


def test_component_lifecycle(tmp_path):
    fs = FakeSysfs(tmp_path / "sys")
    fs.pci("0000:5e:00.0", vendor="144d", device="a808", cls="010802", driver="nvme", numa=0)
    cfg = _config(f'[daemon]\nsysfs_root = "{fs.root}"\n')
    ctx = DaemonContext(cfg, tmp_path / "root", synthetic(), mode="standalone")
    comp = factory(ctx)
    assert comp is not None and comp.name == "deviceplugins"

    async def run():
        await comp.start(ctx)
        sock = comp.plugin_dir / socket_name("hwagent.io/nvme")
        assert sock.is_socket() and comp.healthy()
        assert ctx.lookup(DEVICE_HEALTH) is comp.board
        assert not comp.hotplug_enabled  # fixture root: no uevents to follow
        await comp.stop()
        assert not sock.exists() and not comp.healthy()

    asyncio.run(run())
