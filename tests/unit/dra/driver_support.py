"""A DRA driver over loop disks and claim files in a temp root (unit and fault tests)."""

from __future__ import annotations

import json
from pathlib import Path

from agent.devices.config import ResourceRule
from agent.devices.model import Device, DevNode, Inventory
from agent.devices.rules import assign
from agent.dra.catalog import catalog
from agent.dra.driver import DraDriver, NodeDevices
from agent.dra.source import FileClaimSource

RULE = ResourceRule(name="example.com/scratch", block_name=("loop*",), env={"SCRATCH": "{dev_nodes}"}, api="dra")
CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "scratch.example.com"},
         "spec": {"selectors": [{"cel": {"expression":
                                         'device.attributes["hwagent.io"].resource == "example.com/scratch"'}}]}}


def loop_inventory(n: int = 4) -> Inventory:
    devs = {f"loop{i}": Device(f"loop{i}", "block", f"loop{i}", f"/sys/devices/virtual/block/loop{i}",
                               dev_nodes=(DevNode(f"/dev/loop{i}", "block", 7, i),)) for i in range(n)}
    return Inventory(devs)


def node_devices(n: int = 4) -> NodeDevices:
    inv = loop_inventory(n)
    return NodeDevices(inv, {RULE.name: RULE}, catalog(inv, assign(inv, (RULE,)), "node1", "hwagent.io"))


def claim_doc(name: str, uid: str, devices: list[str] | None = None, count: int = 1) -> dict:
    doc: dict = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": name, "namespace": "default", "uid": uid},
                 "spec": {"devices": {"requests": [{"name": "disk", "exactly": {
                     "deviceClassName": "scratch.example.com", "count": count}}]}}}
    if devices is not None:
        doc["status"] = {"allocation": {"devices": {"results": [
            {"request": "disk", "driver": "hwagent.io", "pool": "node1/example.com/scratch", "device": d}
            for d in devices]}}}
    return doc


def write_claim(root: Path, doc: dict) -> None:
    d = root / "dra"
    d.mkdir(parents=True, exist_ok=True)
    (d / "class.json").write_text(json.dumps(CLASS))
    (d / f"{doc['metadata']['name']}.json").write_text(json.dumps(doc))


def make_driver(root: Path, n: int = 4) -> DraDriver:
    drv = DraDriver("hwagent.io", root / "dra-state" / "prepared.json", str(root / "cdi"), FileClaimSource(root),
                    lambda: node_devices(n))
    drv.restore()
    return drv
