"""ResourceClaim and DeviceClass files: the upstream v1 shapes accepted, everything
hwagent would have to ignore or could not hold refused with a message naming it."""

from __future__ import annotations

import copy
import os

import pytest

from agent.dra.claims import AllocatedDevice, ClaimError, allocation_status, parse_claim, parse_device_class
from agent.dra.files import MAX_FILE_BYTES, ClaimFiles

CLAIM = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "nics", "namespace": "team-a", "uid": "0b6c2f3a-1111-2222-3333-444455556666"},
    "spec": {"devices": {
        "requests": [
            {"name": "nic", "exactly": {"deviceClassName": "net.example.com", "count": 2,
                                        "selectors": [{"cel": {"expression": 'device.attributes["hwagent.io"].kind == "pci"'}}]}},
            {"name": "disk", "exactly": {"deviceClassName": "disk.example.com", "allocationMode": "All"}},
        ],
        "constraints": [{"requests": ["nic", "disk"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    }},
}


def test_claim_parses_requests_modes_and_constraints() -> None:
    c = parse_claim(CLAIM)
    assert (c.namespace, c.name, c.uid) == ("team-a", "nics", "0b6c2f3a-1111-2222-3333-444455556666")
    nic, disk = c.requests
    assert (nic.mode, nic.count, nic.device_class) == ("ExactCount", 2, "net.example.com")
    assert (disk.mode, disk.count) == ("All", 0)
    assert c.constraints[0].match_attribute == "resource.kubernetes.io/pcieRoot"
    assert c.allocation is None


def test_local_claim_without_uid_gets_a_stable_one() -> None:
    doc = copy.deepcopy(CLAIM)
    del doc["metadata"]["uid"]
    assert parse_claim(doc).uid == parse_claim(copy.deepcopy(doc)).uid != ""


def _with(path: tuple, value) -> dict:
    doc = copy.deepcopy(CLAIM)
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return doc


@pytest.mark.parametrize("path,value,why", [
    (("apiVersion",), "resource.k8s.io/v1beta1", "apiVersion must be"),
    (("metadata", "name"), "../../etc/passwd", "metadata.name"),
    (("metadata", "name"), "a" * 300, "1-253"),
    (("metadata", "namespace"), "Team_A", "namespace"),
    (("metadata", "uid"), "x/../y", "metadata.uid"),
    (("spec", "devices", "requests"), [], "is empty"),
    (("spec", "devices", "requests"), [{"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(33)],
     "at most 32"),
    (("spec", "devices", "requests", 0, "exactly", "count"), 0, "count must be"),
    (("spec", "devices", "requests", 0, "exactly", "count"), True, "count must be"),
    (("spec", "devices", "requests", 0, "exactly", "allocationMode"), "Some", "allocationMode"),
    (("spec", "devices", "requests", 0, "exactly", "adminAccess"), True, "adminAccess"),
    (("spec", "devices", "requests", 1, "exactly", "count"), 1, "must not be set with allocationMode All"),
    (("spec", "devices", "requests", 0, "firstAvailable"), [], "firstAvailable"),
    (("spec", "devices", "constraints", 0, "requests"), ["nope"], "no request of this claim"),
    (("spec", "devices", "constraints", 0, "matchAttribute"), "pcieRoot", "fully qualified"),
    (("spec", "devices", "config"), [], "config"),
    (("spec", "devices", "requests", 0, "exactly", "selectors"), [{"cel": {"expression": "x" * 10241}}],
     "at most 10240"),
])
def test_claim_refusals_name_the_field(path, value, why) -> None:
    with pytest.raises(ClaimError, match=why):
        parse_claim(_with(path, value))


def test_allocation_roundtrips_through_status() -> None:
    c = parse_claim(CLAIM)
    res = (AllocatedDevice("nic", "hwagent.io", "n/example.com/net", "pci-0000-02-00-0"),)
    again = parse_claim(allocation_status(c, res))
    assert again.allocation == res and again.requests == c.requests
    assert parse_claim(allocation_status(again, None)).allocation is None


def test_device_class_parses_and_refuses_unknown_fields() -> None:
    doc = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "net.example.com"},
           "spec": {"selectors": [{"cel": {"expression": 'device.driver == "hwagent.io"'}}]}}
    assert parse_device_class(doc).selectors == ('device.driver == "hwagent.io"',)
    doc["spec"]["extendedResourceName"] = "x"
    with pytest.raises(ClaimError, match="extendedResourceName"):
        parse_device_class(doc)


def _write(d, name: str, text: str) -> None:
    (d / name).write_text(text)


def test_files_load_classes_and_claims_and_name_the_bad_file(tmp_path) -> None:
    import json

    d = tmp_path / "dra"
    d.mkdir()
    _write(d, "classes.yaml", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: net.example.com}\n"
           "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: disk.example.com}\n")
    _write(d, "nics.json", json.dumps(CLAIM))
    f = ClaimFiles(tmp_path).load()
    assert set(f.classes) == {"net.example.com", "disk.example.com"}
    assert set(f.claims) == {("team-a", "nics")}
    _write(d, "bad.yaml", "kind: DeviceClass\n  : [")
    with pytest.raises(ClaimError, match="bad.yaml is not valid YAML"):
        ClaimFiles(tmp_path).load()
    _write(d, "bad.yaml", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: net.example.com}\n")
    with pytest.raises(ClaimError, match="net.example.com is defined in bad.yaml too"):
        ClaimFiles(tmp_path).load()
    _write(d, "bad.yaml", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c}\n"
           "spec: {selectors: [{cel: {expression: 'device.driver =='}}]}\n")
    with pytest.raises(ClaimError, match="does not compile"):
        ClaimFiles(tmp_path).load()
    (d / "bad.yaml").unlink()
    (d / "big.yaml").write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(ClaimError, match="larger than"):
        ClaimFiles(tmp_path).load()
    (d / "big.yaml").unlink()
    os.symlink("/etc/passwd", d / "link.yaml")
    with pytest.raises(OSError, match="symbolic link"):
        ClaimFiles(tmp_path).load()


def test_write_allocation_keeps_the_rest_of_the_document(tmp_path) -> None:
    import json

    d = tmp_path / "dra"
    d.mkdir()
    _write(d, "nics.json", json.dumps(CLAIM))
    files = ClaimFiles(tmp_path)
    loaded = files.load()
    res = (AllocatedDevice("nic", "hwagent.io", "p", "dev-a"),)
    files.write_allocation(loaded, loaded.claims[("team-a", "nics")], res)
    again = files.load().claims[("team-a", "nics")]
    assert again.allocation == res and again.constraints == loaded.claims[("team-a", "nics")].constraints
