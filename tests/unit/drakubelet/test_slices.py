"""ResourceSlices from discovery: a real machine's sysfs snapshot, the rules' pools, the attributes CEL sees."""

from __future__ import annotations

import re

import pytest

from agent.devices.config import ResourceRule
from agent.devices.rules import DEFAULT_RULES, assign
from agent.devices.sysfs import read_inventory
from agent.dra.slices import (
    STD_PCI_BUS_ID, STD_PCIE_ROOT, build_slices, device_attributes, dra_device_name, pcie_root,
)

SNAPSHOT = "32em64t-2n8c+dax+nvme+mic+dimms"
IOAT = ResourceRule(name="example.com/ioat", pci_class=("0880",), driver=("ioatdma",))
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@pytest.fixture(scope="module")
def machine(hwloc_extract):
    inv = read_inventory(hwloc_extract(SNAPSHOT) / "sys")
    return inv, assign(inv, DEFAULT_RULES + (IOAT,))


def test_one_slice_per_resource_with_every_healthy_member(machine) -> None:
    inv, assignment = machine
    slices = build_slices(inv, assignment, "node-a", "hwagent.io")
    by_res = {s["spec"]["pool"]["name"]: s for s in slices}
    assert set(by_res) == {f"node-a/{r}" for r in assignment.members}
    ioat = by_res["node-a/example.com/ioat"]["spec"]
    assert len(ioat["devices"]) == len(assignment.members["example.com/ioat"]) == 16
    assert ioat["driver"] == "hwagent.io" and ioat["nodeName"] == "node-a"
    for s in slices:
        assert s["apiVersion"] == "resource.k8s.io/v1" and s["kind"] == "ResourceSlice"
        for d in s["spec"]["devices"]:
            assert DNS_LABEL.match(d["name"]), d["name"]
            assert len(d["attributes"]) + len(d.get("capacity", {})) <= 32


def test_numa_pci_ids_and_root_come_from_the_snapshot(machine) -> None:
    inv, assignment = machine
    numa = {}
    for dev_id in assignment.members["example.com/ioat"]:
        dev = inv.get(dev_id)
        attrs = device_attributes(dev, "example.com/ioat", inv)
        assert attrs["vendorID"] == {"string": dev.pci.vendor} == {"string": "8086"}
        assert attrs["deviceID"] == {"string": dev.pci.device}
        assert attrs[STD_PCI_BUS_ID] == attrs["pciAddress"] == {"string": dev_id}
        assert attrs[STD_PCIE_ROOT]["string"] == pcie_root(dev)
        assert dev.sysfs_path.split("/").count(pcie_root(dev)) == 1
        numa[dev_id] = attrs["numaNode"]["int"]
    # the snapshot's 16 DMA engines: 8 on each NUMA node, each node under its own root complex
    assert sorted(numa.values()) == [0] * 8 + [1] * 8
    roots = {numa[d]: device_attributes(inv.get(d), "x", inv)[STD_PCIE_ROOT]["string"] for d in numa}
    assert roots[0] != roots[1]


def test_unhealthy_by_rule_is_left_out(machine) -> None:
    inv, assignment = machine
    from agent.devices.rules import Assignment

    victim = assignment.members["example.com/ioat"][0]
    sick = Assignment(assignment.members, {victim: "driver unbound"}, assignment.conflicts)
    names = [d["name"] for s in build_slices(inv, sick, "n", "hwagent.io")
             if s["spec"]["pool"]["name"] == "n/example.com/ioat" for d in s["spec"]["devices"]]
    assert dra_device_name(victim) not in names and len(names) == 15


def test_device_names_are_labels_and_distinct() -> None:
    assert dra_device_name("0000:3b:00.0") == "pci-0000-3b-00-0"
    assert dra_device_name("loop0") == "loop0"
    assert dra_device_name("eth_0.100") == "eth-0-100"
    assert dra_device_name("0000:3b:00.0") != dra_device_name("0000:3b:00.1")
