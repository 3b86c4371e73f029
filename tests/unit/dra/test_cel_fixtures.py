"""CEL selectors (cel-python) against the attributes a real machine's devices get
(hwloc snapshot), read from the same snapshot on the test's side."""

from __future__ import annotations

import pytest

from agent.dra.cel import CELError, device_activation, matches
from tests.unit.dra.fixture_devices import TWO_NODES, snapshot_devices


@pytest.fixture(scope="module")
def devices(hwloc_extract):
    return snapshot_devices(hwloc_extract(TWO_NODES))


def _select(devices, expr: str) -> set[str]:
    return {d.name for d in devices if matches(expr, device_activation(d.driver, d.attributes, d.capacity), d.name)}


def test_selectors_see_the_snapshots_attributes(devices) -> None:
    nets = {d.name for d in devices if d.resource == "example.com/net"}
    assert len(nets) >= 2
    assert _select(devices, 'device.attributes["hwagent.io"].resource == "example.com/net"') == nets
    numa1 = {d.name for d in devices if d.numa_node == 1}
    assert numa1, "the snapshot has devices on node 1"
    expr = 'has(device.attributes["hwagent.io"].numaNode) && device.attributes["hwagent.io"].numaNode == 1'
    assert _select(devices, expr) == numa1
    roots = {d.attributes.get("resource.kubernetes.io/pcieRoot") for d in devices}
    assert len(roots - {None}) >= 2
    on80 = {d.name for d in devices if d.attributes.get("resource.kubernetes.io/pcieRoot") == "pci0000:80"}
    assert _select(devices, 'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:80"') == on80
    nvme = {d.name for d in devices if d.attributes.get("hwagent.io/pciClass", "").startswith("0108")}
    assert nvme and _select(devices, 'device.attributes["hwagent.io"].pciClass.startsWith("0108")') == nvme
    assert _select(devices, 'device.driver == "other.io"') == set()


def test_missing_attribute_is_an_error_not_a_silent_skip(devices) -> None:
    nvme = next(d for d in devices if d.numa_node is None)
    with pytest.raises(CELError, match="failed on device"):
        matches('device.attributes["hwagent.io"].numaNode == 0',
                device_activation(nvme.driver, nvme.attributes, nvme.capacity), nvme.name)
    with pytest.raises(CELError, match="not a bool"):
        matches('device.driver', device_activation(nvme.driver, nvme.attributes, nvme.capacity), nvme.name)
