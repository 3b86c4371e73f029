"""The registry's records on disk: atomic, checksummed, and a bad file stops start
unless the loss is accepted (then it is kept aside, never overwritten)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import stat

import pytest

from agent.cpuset import CPUSet
from agent.workloads.manifest import parse_manifest
from agent.contracts.pods import (
    AdmittedPod,
    ContainerAssignment,
    ContainerState,
    ContainerStatus,
    DeviceGrant,
    DeviceNode,
    Mount,
    PodPhase,
    PodStatus,
)
from agent.workloads.registry import ADDED, DELETED, MODIFIED, Registry
from agent.workloads.store import PodFileStore, PodRecord, RegistryStateError, decode, encode

TEXT = """
metadata: {name: web, uid: u-1, annotations: {katalyst.kubewharf.io/qos_level: dedicated_cores}}
spec:
  initContainers: [{name: init, command: [/bin/true]}]
  containers:
  - {name: main, command: [sleep], args: ['1'], env: [{name: A, value: "é"}], resources: {limits: {cpu: 2, x.io/d: 1}}}
"""


def _pod(uid: str = "u-1", name: str = "web", at: float = 1.0) -> AdmittedPod:
    spec = parse_manifest(TEXT.replace("u-1", uid).replace("name: web", f"name: {name}")).pod
    grant = DeviceGrant(
        envs={"X": "1"}, mounts=(Mount("/c", "/h", True),), devices=(DeviceNode("/dev/d", "/dev/d", "rw"),),
        annotations={"a": "b"}, cdi_devices=("v/c=d",),
    )
    return AdmittedPod(
        spec=spec,
        qos="dedicated",
        assignments={
            "init": ContainerAssignment("init", CPUSet.parse("0-7")),
            "main": ContainerAssignment("main", CPUSet.parse("1,5"), CPUSet([0]), frozenset({0}), {"x.io/d": ("d0",)}, grant),
        },
        admitted_at=at,
    )


def test_a_record_round_trips_exactly():
    status = PodStatus(
        PodPhase.RUNNING, "", "", (ContainerStatus("main", ContainerState.RUNNING, pid=42, started_at=2.5),), 2.0
    )
    rec = PodRecord(_pod(), status, released=False, events=((1.0, "admitted"),))
    assert decode(encode(rec)) == rec


def test_tampering_is_detected(tmp_path):
    store = PodFileStore(tmp_path)
    store.put(PodRecord(_pod()))
    p = tmp_path / "u-1.json"
    doc = json.loads(p.read_bytes())
    doc["record"]["pod"]["assignments"][1]["cpus"] = "0-7"
    p.write_text(json.dumps(doc))
    with pytest.raises(RegistryStateError) as ei:
        store.load()
    assert "checksum mismatch" in str(ei.value) and "accept_state_loss" in str(ei.value)
    assert p.exists()  # untouched without the option


def test_accepting_the_loss_keeps_the_bad_file_aside_and_loads_the_rest(tmp_path):
    store = PodFileStore(tmp_path)
    store.put(PodRecord(_pod("u-1", "a", 1.0)))
    store.put(PodRecord(_pod("u-2", "b", 2.0)))
    (tmp_path / "u-1.json").write_bytes(b"{torn")
    (tmp_path / ".u-3.json.tmp-123").write_bytes(b"half")  # an interrupted write is ignored
    recs = store.load(accept_loss=True)
    assert [r.uid for r in recs] == ["u-2"]
    aside = [p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and aside[0].startswith("u-1.json.corrupt-")
    assert not (tmp_path / "u-1.json").exists()


def test_a_record_under_the_wrong_name_is_refused(tmp_path):
    store = PodFileStore(tmp_path)
    store.put(PodRecord(_pod()))
    (tmp_path / "u-1.json").rename(tmp_path / "other.json")
    with pytest.raises(RegistryStateError, match="not the one its name says"):
        store.load()


def test_registry_persists_each_change_and_emits_events(tmp_path):
    async def main():
        reg = Registry(PodFileStore(tmp_path))
        seen: list[str] = []
        reg.listeners.append(lambda ev: seen.append(ev.type))
        reg.reserve("default/web", "u-1")
        assert reg.taken("default/web", "u-9") and reg.taken("default/x", "u-1")
        assert reg.active_pod_uids() == {"u-1"}  # in flight counts as active
        await reg.add(_pod())
        reg.unreserve("default/web", "u-1")
        await reg.update("u-1", status=PodStatus(PodPhase.SUCCEEDED), line="done")
        assert reg.active_pod_uids() == frozenset()
        again = Registry(PodFileStore(tmp_path))
        again.restore(PodFileStore(tmp_path).load())
        assert again.record("u-1") == reg.record("u-1")
        assert [m for _, m in again.record("u-1").events] == ["admitted", "done"]
        await reg.delete("u-1")
        assert seen == [ADDED, MODIFIED, DELETED]
        assert PodFileStore(tmp_path).load() == []

    asyncio.run(main())


def test_a_failed_write_records_nothing(tmp_path):
    class Broken(PodFileStore):
        def put(self, record):
            raise OSError(28, "No space left on device")

    async def main():
        reg = Registry(Broken(tmp_path))
        with pytest.raises(OSError):
            await reg.add(_pod())
        assert len(reg) == 0 and reg.by_key("default/web") is None

    asyncio.run(main())


def test_a_write_that_fails_after_the_rename_leaves_no_record_behind(tmp_path):
    class LateFailure(PodFileStore):
        def put(self, record):
            super().put(record)
            raise OSError(5, "Input/output error")  # e.g. the directory fsync

    async def main():
        reg = Registry(LateFailure(tmp_path))
        with pytest.raises(OSError):
            await reg.add(_pod())
        assert len(reg) == 0
        assert PodFileStore(tmp_path).load() == []

    asyncio.run(main())


def test_a_store_dir_that_is_a_planted_link_is_neither_written_nor_read(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    PodFileStore(outside).put(PodRecord(_pod("u-9")))  # a record someone wants hwagent to run
    root = tmp_path / "root"
    (root / "workloads").mkdir(parents=True)
    (root / "workloads" / "pods").symlink_to(outside)
    store = PodFileStore(root / "workloads" / "pods")
    with pytest.raises(OSError, match="symbolic link"):
        store.load()
    with pytest.raises(OSError, match="symbolic link"):
        store.put(PodRecord(_pod("u-1")))
    assert sorted(p.name for p in outside.iterdir()) == ["u-9.json"]


def test_every_directory_from_the_root_dir_down_is_checked(tmp_path):
    outside = tmp_path / "outside"
    (outside / "pods").mkdir(parents=True)
    root = tmp_path / "root"
    root.mkdir()
    (root / "workloads").symlink_to(outside)
    store = PodFileStore(root / "workloads" / "pods", root_dir=root)
    with pytest.raises(OSError, match="symbolic link"):
        store.put(PodRecord(_pod("u-1")))
    assert list((outside / "pods").iterdir()) == []


def test_the_store_is_owner_only_and_a_looser_dir_is_tightened(tmp_path):
    d = tmp_path / "workloads" / "pods"
    d.mkdir(parents=True)
    os.chmod(d, 0o755)
    store = PodFileStore(d)
    store.put(PodRecord(_pod("u-1")))
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / "u-1.json").stat().st_mode) == 0o600


def _record() -> PodRecord:
    status = PodStatus(PodPhase.RUNNING, "", "", (ContainerStatus("main", ContainerState.RUNNING, pid=42),), 2.0)
    return PodRecord(_pod(), status, events=((1.0, "admitted"),))


def test_a_record_as_written_is_verified_on_its_bytes_not_encoded_again(monkeypatch):
    """Issue 24: re-encoding every record to check its checksum was 635 ms of a
    10,000-pod restart; the file's own bytes are what was signed."""
    import agent.workloads.store as store_mod

    calls: list[object] = []
    real = store_mod.sha256_checksum

    def counting(obj, **kw):
        calls.append(obj)
        return real(obj, **kw)

    monkeypatch.setattr(store_mod, "sha256_checksum", counting)
    rec = _record()
    raw = encode(rec)
    calls.clear()
    assert decode(raw) == rec
    assert calls == []


def test_every_one_byte_change_of_a_record_is_refused():
    raw = encode(_record())
    for i in range(len(raw)):
        bad = raw[:i] + bytes([raw[i] ^ 0x01]) + raw[i + 1:]
        with pytest.raises(RegistryStateError):
            decode(bad)


def test_a_record_laid_out_otherwise_is_still_checked_on_its_meaning():
    """A file another writer indented (same values, same checksum) loads; the same with
    one value changed does not."""
    doc = json.loads(encode(_record()))
    assert decode(json.dumps(doc, indent=2).encode()) == _record()
    doc["record"]["released"] = True
    with pytest.raises(RegistryStateError, match="checksum mismatch"):
        decode(json.dumps(doc, indent=2).encode())


def test_a_record_is_serialised_once_per_write_and_its_bytes_are_the_canonical_document(monkeypatch):
    """Issue 23: each record write serialised the record twice (once to sign it, once for the
    file); the file is the signed text with the checksum put in front, byte for byte the
    canonical JSON of the whole document, as before (older daemons read it unchanged)."""
    import agent.workloads.store as store_mod
    from agent.statefile import canonical_json, sha256_checksum

    rec = dataclasses.replace(_record(), events=((1.0, "admitted ü \"q\" \\ \n"),))
    body = store_mod.record_to_json(rec)
    signed = {"version": store_mod.VERSION, "record": body}
    want = canonical_json(signed | {"checksum": sha256_checksum(signed)}) + b"\n"
    calls: list[object] = []
    real = store_mod.canonical_str

    def counting(obj, **kw):
        calls.append(obj)
        return real(obj, **kw)

    monkeypatch.setattr(store_mod, "canonical_str", counting)
    assert encode(rec) == want
    assert len(calls) == 1, f"the record was serialised {len(calls)} times"
    assert decode(want) == rec
