"""The runtime's managed devices: every source counted (issue 32 item 8).

A claim's devices reach a pod as CDI names (the DRA driver's spec), as may an outside device
plugin's; the rules offer devices through either API. Before issue 32 only the device nodes a
plugin's Allocate named were counted, so a claimed node was open to every other pod."""

from __future__ import annotations

import json

from agent.config import section_defaults
from agent.contracts import DEVICE_PLUGINS, WORKLOADS, DaemonContext
from agent.contracts.dra import DRA_POD_CLAIMS
from agent.contracts.pods import DeviceGrant, DeviceNode
from agent.runtime.component import RuntimeComponent
from agent.runtime.config import RUNTIME_SECTION
from agent.topology.model import synthetic

from .conftest import make_pod


class Registry:
    def __init__(self, pods) -> None:
        self.pods = pods

    def admitted(self):
        return list(self.pods)


class Offers:
    """What the devices component (or the DRA driver) says its rules offer."""

    def __init__(self, nodes) -> None:
        self.nodes = tuple(nodes)

    def device_nodes(self):
        return self.nodes


def test_offered_granted_and_cdi_held_nodes_are_all_managed(tmp_path):
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "claim.json").write_text(json.dumps({
        "cdiVersion": "1.0.0", "kind": "hwagent.io/claim",
        "devices": [{"name": "uid-loop7", "containerEdits": {"deviceNodes": [
            {"path": "/dev/loop7", "hostPath": "/dev/loop7", "permissions": "rw"}]}}]}))
    claimed = make_pod("claimer", ["true"], grant=DeviceGrant(cdi_devices=("hwagent.io/claim=uid-loop7",)))
    plugged = make_pod("plugged", ["true"], grant=DeviceGrant(devices=(DeviceNode("/dev/loop8", "/dev/loop8"),)))
    unknown = make_pod("unknown", ["true"], grant=DeviceGrant(cdi_devices=("nowhere.io/x=y",)))
    cfg = section_defaults().replace("runtime", cdi_spec_dirs=[str(cdi)])
    ctx = DaemonContext(cfg, tmp_path / "root", synthetic(), mode="standalone")
    ctx.publish(WORKLOADS, Registry([claimed, plugged, unknown]))
    ctx.publish(DEVICE_PLUGINS, Offers(["/dev/nvidia0", "/dev/loop8"]))
    ctx.publish(DRA_POD_CLAIMS, Offers(["/dev/loop7", "/dev/loop9"]))
    comp = RuntimeComponent(cfg[RUNTIME_SECTION])
    comp._ctx = ctx
    got = set(comp._managed_devices())
    # a pod's unknown CDI name (it cannot start) hides no other pod's nodes
    assert got == {"/dev/nvidia0", "/dev/loop7", "/dev/loop8", "/dev/loop9"}, got
