"""Standalone mode end to end: hwagent's own device-plugin host (the
devicemanager component) and the built-in plugins, both from the daemon's
factories, over real unix sockets. Devices come from a two-socket hwloc
snapshot so that NUMA-aware choice is visible."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

from agent.contracts import DaemonContext
from agent.daemon.daemon import prepare_root
from agent.config import loads
from agent.contracts import ACTIVE_PODS, DEVICE_HEALTH, DEVICE_MANAGER
from agent.deviceplugin.component import factory as plugins_factory
from agent.devicemanager.component import factory as host_factory
from agent.contracts.devices import ContainerRequest
from agent.pods import StaticActivePods
from agent.topology.model import synthetic

RES = "example.com/ioat"


def test_builtin_plugins_register_with_hwagents_own_host(request, hwloc_extract):
    sysfs = hwloc_extract("32em64t-2n8c+dax+nvme+mic+dimms") / "sys"
    numa = {p.name: int((p / "numa_node").read_text()) for p in (sysfs / "bus/pci/devices").iterdir()
            if (p / "driver").is_symlink() and Path(os.readlink(p / "driver")).name == "ioatdma"}
    cfg = loads(f'''
[daemon]
sysfs_root = "{sysfs}"
[devices]
default_rules = false
register_backoff_initial_s = 0.05
socket_check_interval_s = 0.05
[[devices.resources]]
name = "{RES}"
vendor = ["8086"]
driver = ["ioatdma"]
''')
    # unix socket paths must fit in 107 bytes; pytest's tmp_path can be longer
    short = Path(tempfile.mkdtemp(prefix="hwdp", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(short, ignore_errors=True))
    ctx = DaemonContext(cfg, short / "root", synthetic(sockets=2), mode="standalone")
    ctx.publish(ACTIVE_PODS, StaticActivePods({"pod-1"}))
    prepare_root(ctx.root_dir)

    async def run():
        host = host_factory(ctx)
        await host.start(ctx)
        plugins = plugins_factory(ctx)
        await plugins.start(ctx)
        try:
            manager = ctx.lookup(DEVICE_MANAGER)

            async def registered():
                while manager.capacity()[1].get(RES, 0) < len(numa):
                    await asyncio.sleep(0.02)
            await asyncio.wait_for(registered(), 10)
            cap, alloc, _ = manager.capacity()
            assert cap[RES] == alloc[RES] == len(numa)
            node = sorted(set(numa.values()))[-1]
            want = sum(1 for n in numa.values() if n == node)
            result = await manager.allocate(ContainerRequest("pod-1", "c", {RES: want}, hint=frozenset({node})))
            opts = manager.run_options("pod-1", "c")
            given = opts.envs["PCIDEVICE_EXAMPLE_COM_IOAT"].split(",")
            assert len(given) == want and {numa[a] for a in given} == {node}
            assert result is not None
            # the health board reaches the host: allocatable drops by one
            assert ctx.lookup(DEVICE_HEALTH).set_health_for("pci", given[0], False, "dma error", "test") == [given[0]]

            async def dropped():
                while manager.capacity()[1][RES] != len(numa) - 1:
                    await asyncio.sleep(0.02)
            await asyncio.wait_for(dropped(), 10)
        finally:
            await plugins.stop()
            await host.stop()

    asyncio.run(run())
