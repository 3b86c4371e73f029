"""Checkpoint encoding, verification and atomic writes (no gRPC)."""

from __future__ import annotations

import json

import pytest

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb
from agent.devicemanager.checkpoint import CheckpointCorrupt, decode, encode, load
from agent.contracts.devices import CheckpointData, EndpointRecord
from agent.contracts.devices import Allocation, Device


def _alloc(pod="p", ctype="app", devices=(("a", (0,)), ("b", (0, 1)), ("c", ()))):
    resp = pb.ContainerAllocateResponse(envs={"K": "V"}, cdi_devices=[pb.CDIDevice(name="v.com/x=a")])
    return Allocation(pod, "ns", "name", "ctr", ctype, "example.com/r", tuple(devices), resp.SerializeToString())


def _data():
    return CheckpointData(
        allocations=(_alloc(), _alloc("q", "init", devices=(("d", (1,)),))),
        registered={"example.com/r": ("a", "b")},
        devices={"example.com/r": (Device("a", True, (0,)), Device("b", True, (0, 1)), Device("c", False, ()))},
        endpoints=(EndpointRecord("example.com/r", "/x/p.sock", "connected"),),
        deleted=("example.com/gone",),
    )


def test_round_trip_keeps_everything():
    back = decode(encode(_data()))
    assert back == _data()
    assert back.allocations[0].response_pb().envs["K"] == "V"


def test_kubelet_shaped_entries():
    doc = json.loads(encode(_data()))
    e = doc["Data"]["PodDeviceEntries"][0]
    assert e["DeviceIDs"] == {"-1": ["c"], "0": ["a", "b"], "1": ["b"]}  # multi-node device under both
    assert set(e) >= {"PodUID", "ContainerName", "ResourceName", "DeviceIDs", "AllocResp"}
    assert doc["Data"]["RegisteredDevices"] == {"example.com/r": ["a", "b"]}


def test_uncommitted_allocations_are_not_written():
    reserved = Allocation("p", "", "", "c", "app", "example.com/r", (("a", ()),), None)
    assert decode(encode(CheckpointData(allocations=(reserved,)))).allocations == ()


@pytest.mark.parametrize(
    "raw,why",
    [
        (b"", "not JSON"),
        (b"[]", "missing Version"),
        (b'{"Version":1,"Checksum":"sha256:00","Data":{}}', "checksum"),
        (b'{"Version":3,"Checksum":"x","Data":{}}', "format version 3"),
    ],
)
def test_corrupt_inputs_are_named(raw, why):
    with pytest.raises(CheckpointCorrupt, match=why):
        decode(raw)


def test_valid_checksum_over_bad_shape_is_still_corrupt():
    import hashlib

    data = {"PodDeviceEntries": [{"PodUID": 1}], "RegisteredDevices": {}, "Devices": {}, "Endpoints": [], "Deleted": []}
    body = json.dumps(data, sort_keys=True, separators=(",", ":"))
    raw = json.dumps({"Version": 1, "Checksum": "sha256:" + hashlib.sha256(body.encode()).hexdigest(), "Data": data})
    with pytest.raises(CheckpointCorrupt, match="missing|wrong type"):
        decode(raw.encode())


def test_load_sets_corrupt_file_aside(tmp_path):
    path = tmp_path / "cp"
    assert load(path) is None  # absent: fine, nothing created
    path.write_bytes(b"{broken")
    assert load(path) is None
    assert not path.exists()
    aside = list(tmp_path.glob("cp.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == b"{broken"
    path.write_bytes(b"{broken again")
    assert load(path) is None
    assert len(list(tmp_path.glob("cp.corrupt-*"))) == 2  # never overwrites an earlier one


def test_encoding_is_canonical_json_of_data():
    """The spliced, cached entry encoding equals one canonical dump of Data,
    so a re-indented file still verifies (slow path) and the fast path agrees."""
    import hashlib

    raw = encode(_data())
    doc = json.loads(raw)
    body = json.dumps(doc["Data"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert doc["Checksum"] == "sha256:" + hashlib.sha256(body.encode()).hexdigest()
    pretty = json.dumps(doc, indent=2).encode()  # another layout, same content
    assert decode(pretty) == decode(raw) == _data()
    tampered = json.loads(raw)
    tampered["Data"]["Deleted"] = ["example.com/other"]
    with pytest.raises(CheckpointCorrupt, match="checksum"):
        decode(json.dumps(tampered).encode())


def test_version_1_file_is_still_read():
    from agent.devicemanager.checkpoint import decode_with_seq
    from agent.statefile import sha256_checksum

    doc = json.loads(encode(_data()))
    del doc["Data"]["JournalSeq"]
    doc["Version"] = 1
    doc["Checksum"] = sha256_checksum(doc["Data"])
    back, seq = decode_with_seq(json.dumps(doc).encode())
    assert back == _data() and seq == 0
