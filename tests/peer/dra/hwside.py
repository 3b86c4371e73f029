"""hwagent's side of the DRA harness: the driver (``agent.dra.driver.DraDriver`` over
claim files) and the kubelet plugin (``agent.dra.kubeletplugin``) on one asyncio loop,
as the daemon wires them, over four synthetic loop disks (no device is opened: the
CDI spec only names /dev/loopN).

    python tests/peer/dra/hwside.py KUBELET_ROOT ROOT CDI_DIR CLAIM_OUT

writes ``ROOT/dra/`` (a DeviceClass and one allocated ResourceClaim, resource.k8s.io/v1)
and the same claim as resource.k8s.io/v1beta1 JSON to CLAIM_OUT (what a 1.32 API
server would hold, for the harness's fake client), prints ``READY`` and serves until
SIGTERM/SIGINT. Run with hwagent's venv python from the repository root.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from agent.config import section_defaults
from agent.contracts import DEVICE_PLUGINS, DRA_DRIVER, DaemonContext
from agent.contracts.plugins import PluginDeviceState, PluginState
from agent.devices.config import ResourceRule
from agent.devices.model import Device, DevNode, Inventory
from agent.devices.rules import assign
from agent.dra.catalog import catalog
from agent.dra.driver import DraDriver, NodeDevices
from agent.dra.kubeletplugin.component import DRAKubeletPlugin
from agent.dra.slices import dra_device_name, pool_name
from agent.dra.source import FileClaimSource
from agent.topology.model import synthetic

DRIVER = "hwagent.io"
NODE = "harness-node"
RULE = ResourceRule(name="example.com/scratch", block_name=("loop*",), api="dra")
UID = "0b1f7e2c-3a44-4c1e-9d1a-6f0c2d9e8a11"
#: the allocation the claim carries (what a scheduler, or hwagent's standalone allocator, chose)
ALLOCATED = ("loop1", "loop2")


def inventory(n: int = 4) -> Inventory:
    return Inventory({f"loop{i}": Device(f"loop{i}", "block", f"loop{i}", f"/sys/devices/virtual/block/loop{i}",
                                         numa_node=0, dev_nodes=(DevNode(f"/dev/loop{i}", "block", 7, i),))
                      for i in range(n)})


def node_devices() -> NodeDevices:
    inv = inventory()
    return NodeDevices(inv, {RULE.name: RULE}, catalog(inv, assign(inv, (RULE,)), NODE, DRIVER))


def claim(api: str) -> dict:
    request = {"name": "disks", "deviceClassName": "scratch.example.com", "count": len(ALLOCATED)}
    spec = {"requests": [{"name": "disks", "exactly": {k: v for k, v in request.items() if k != "name"}}]} \
        if api == "v1" else {"requests": [request]}
    return {
        "apiVersion": f"resource.k8s.io/{api}", "kind": "ResourceClaim",
        "metadata": {"name": "scratch", "namespace": "default", "uid": UID},
        "spec": {"devices": spec},
        "status": {"allocation": {"devices": {"results": [
            {"request": "disks", "driver": DRIVER, "pool": pool_name(NODE, RULE.name), "device": dra_device_name(d)}
            for d in ALLOCATED]}}},
    }


def write_files(root: Path, claim_out: Path) -> None:
    d = root / "dra"
    d.mkdir(parents=True, exist_ok=True)
    (d / "class.json").write_text(json.dumps({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "scratch.example.com"},
        "spec": {"selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].resource == "{RULE.name}"'}}]},
    }))
    (d / "scratch.json").write_text(json.dumps(claim("v1")))
    claim_out.write_text(json.dumps(claim("v1beta1")))


class Plugins:
    """DEVICE_PLUGINS as the devices component would answer it: the loop disks are offered through
    DRA (no device plugin), every one healthy."""

    def plugin_states(self) -> list[PluginState]:
        return []

    def dra_states(self) -> list[PluginState]:
        return [PluginState(RULE.name, Path(), tuple(
            PluginDeviceState(d.id, True, "", 0) for d in inventory()))]


async def serve(kubelet_root: Path, root: Path, cdi_dir: Path, ready_line: str = "READY") -> None:
    driver = DraDriver(DRIVER, root / "dra-state" / "prepared.json", str(cdi_dir), FileClaimSource(root),
                       node_devices)
    driver.restore()
    ctx = DaemonContext(section_defaults(), root, synthetic(), mode="kubelet")
    ctx.publish(DEVICE_PLUGINS, Plugins())
    ctx.publish(DRA_DRIVER, driver)
    plugin = DRAKubeletPlugin(DRIVER, kubelet_root, NODE)
    await plugin.start(ctx)
    print(ready_line, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print("registration:", json.dumps(plugin.state()), flush=True)
    await plugin.stop()


def main(argv: list[str]) -> int:
    kubelet_root, root, cdi_dir, claim_out = (Path(a) for a in argv)
    write_files(root, claim_out)
    asyncio.run(serve(kubelet_root, root, cdi_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
