"""Standalone mode end to end: hwagent's own device-plugin host (the
devicemanager component) and the built-in plugins, both from the daemon's
factories, over real unix sockets. Devices come from a two-socket hwloc
snapshot so that NUMA-aware choice is visible.

Every wait is for the event the next step needs, polled up to DEADLINE_S and named when
it fails, and each count is read exactly after it: the suite runs beside other jobs
(issue 22 item 14: this test failed in a full run at load 10-29 and passed alone; its
waits gave up after 10 s and said nothing of what they had seen)."""

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
from tests.integration.devicemanager.harness import until
from tests.integration.deviceplugin.kubelet_stub import registrations_reaching

RES = "example.com/ioat"
#: how long a wait may take before the test fails; generous, never a timing assertion
DEADLINE_S = 60.0


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
            # registered from the plugin's side: its Register call came back OK (a Register
            # that timed out on a loaded host is retried; the count says one got through) ...
            registrar = plugins.registrars[RES]
            assert await registrations_reaching(registrar, 1, DEADLINE_S) == 1, registrar.last_error
            # ... and from the host's: the plugin's first ListAndWatch snapshot has arrived
            await until(lambda: manager.capacity()[1].get(RES, 0) >= len(numa), DEADLINE_S,
                        f"the host's allocatable {RES} to reach {len(numa)}")
            cap, alloc, _ = manager.capacity()
            assert cap[RES] == alloc[RES] == len(numa)
            node = sorted(set(numa.values()))[-1]
            want = sum(1 for n in numa.values() if n == node)
            result = await manager.allocate(ContainerRequest("pod-1", "c", {RES: want}, hint=frozenset({node})))
            opts = manager.run_options("pod-1", "c")
            given = opts.envs["PCIDEVICE_EXAMPLE_COM_IOAT"].split(",")
            assert len(given) == want and {numa[a] for a in given} == {node}
            assert result is not None
            # the health board reaches the host (the plugin's next ListAndWatch snapshot):
            # allocatable drops by one, capacity stays
            assert ctx.lookup(DEVICE_HEALTH).set_health_for("pci", given[0], False, "dma error", "test") == [given[0]]
            await until(lambda: manager.capacity()[1][RES] < len(numa), DEADLINE_S,
                        f"the host's allocatable {RES} to drop below {len(numa)}")
            cap, alloc, _ = manager.capacity()
            assert (cap[RES], alloc[RES]) == (len(numa), len(numa) - 1)
            assert registrar.registrations == 1  # registered once: nothing above raced a re-registration
        finally:
            await plugins.stop()
            await host.stop()

    asyncio.run(run())
