"""Prepare/unprepare: idempotent, exclusive, persisted, CDI specs that agent.runtime.cdi reads."""

from __future__ import annotations

import asyncio
import json

from agent.contracts.dra import ClaimRef
from agent.runtime.cdi import resolve
from tests.unit.dra.driver_support import claim_doc, make_driver, write_claim

A = ClaimRef("default", "a", "uid-a")
B = ClaimRef("default", "b", "uid-b")


def test_prepare_writes_a_cdi_spec_and_is_idempotent(tmp_path) -> None:
    write_claim(tmp_path, claim_doc("a", "uid-a", ["loop1", "loop2"], count=2))
    drv = make_driver(tmp_path)
    first = asyncio.run(drv.prepare([A]))["uid-a"]
    assert first.error == ""
    assert [d.device for d in first.devices] == ["loop1", "loop2"]
    ids = [i for d in first.devices for i in d.cdi_device_ids]
    assert ids == ["hwagent.io/claim=uid-a-loop1", "hwagent.io/claim=uid-a-loop2"]
    edits = resolve(ids, [str(tmp_path / "cdi")])
    assert [n.host_path for n in edits.devices] == ["/dev/loop1", "/dev/loop2"]
    assert edits.env["SCRATCH"] == "/dev/loop1,/dev/loop2"
    spec = json.loads(next((tmp_path / "cdi").iterdir()).read_text())
    assert spec["cdiVersion"] == "1.0.0" and spec["kind"] == "hwagent.io/claim"
    # a repeated call, and one by a fresh driver (a restart), give the same answer
    assert asyncio.run(drv.prepare([A]))["uid-a"] == first
    again = make_driver(tmp_path)
    assert asyncio.run(again.prepare([A]))["uid-a"] == first
    assert again.prepared()["uid-a"][1] == first.devices


def test_a_device_is_never_prepared_for_two_claims(tmp_path) -> None:
    write_claim(tmp_path, claim_doc("a", "uid-a", ["loop1"]))
    write_claim(tmp_path, claim_doc("b", "uid-b", ["loop1"]))
    drv = make_driver(tmp_path)
    assert asyncio.run(drv.prepare([A]))["uid-a"].error == ""
    state = (tmp_path / "dra-state" / "prepared.json").read_bytes()
    out = asyncio.run(drv.prepare([B]))["uid-b"]
    assert "loop1" in out.error and "prepared for claim uid-a" in out.error and out.devices == ()
    # the refusal changed nothing
    assert (tmp_path / "dra-state" / "prepared.json").read_bytes() == state
    assert sorted(p.name for p in (tmp_path / "cdi").iterdir()) == ["hwagent.io-claim-uid-a.json"]
    assert asyncio.run(drv.unprepare([A])) == {"uid-a": ""}
    assert asyncio.run(drv.prepare([B]))["uid-b"].error == ""


def test_unprepare_removes_the_spec_and_is_idempotent(tmp_path) -> None:
    write_claim(tmp_path, claim_doc("a", "uid-a", ["loop0"]))
    drv = make_driver(tmp_path)
    asyncio.run(drv.prepare([A]))
    assert asyncio.run(drv.unprepare([A])) == {"uid-a": ""}
    assert list((tmp_path / "cdi").iterdir()) == []
    assert asyncio.run(drv.unprepare([A])) == {"uid-a": ""}
    assert make_driver(tmp_path).prepared() == {}


def test_refusals_name_the_claim(tmp_path) -> None:
    write_claim(tmp_path, claim_doc("a", "uid-a", None))
    drv = make_driver(tmp_path)
    assert "not allocated" in asyncio.run(drv.prepare([A]))["uid-a"].error
    assert "no ResourceClaim default/b" in asyncio.run(drv.prepare([B]))["uid-b"].error
    write_claim(tmp_path, claim_doc("a", "uid-a", ["loop9"]))
    assert "loop9" in asyncio.run(drv.prepare([A]))["uid-a"].error
    assert "re-created" in asyncio.run(drv.prepare([ClaimRef("default", "a", "other")]))["other"].error
    assert drv.prepared() == {}
    assert not (tmp_path / "cdi").exists() or list((tmp_path / "cdi").iterdir()) == []


def test_restart_removes_orphan_specs_and_rewrites_missing_ones(tmp_path) -> None:
    write_claim(tmp_path, claim_doc("a", "uid-a", ["loop0"]))
    drv = make_driver(tmp_path)
    asyncio.run(drv.prepare([A]))
    spec = tmp_path / "cdi" / "hwagent.io-claim-uid-a.json"
    text = spec.read_text()
    spec.unlink()
    (tmp_path / "cdi" / "hwagent.io-claim-killed.json").write_text("{}")  # a prepare killed before its commit
    (tmp_path / "cdi" / "vendor.json").write_text("{}")  # another driver's: left alone
    make_driver(tmp_path)
    assert spec.read_text() == text
    assert sorted(p.name for p in (tmp_path / "cdi").iterdir()) == ["hwagent.io-claim-uid-a.json", "vendor.json"]


def test_corrupt_state_is_set_aside_and_reported(tmp_path) -> None:
    write_claim(tmp_path, claim_doc("a", "uid-a", ["loop0"]))
    asyncio.run(make_driver(tmp_path).prepare([A]))
    path = tmp_path / "dra-state" / "prepared.json"
    path.write_bytes(path.read_bytes().replace(b"loop0", b"loop3"))
    drv = make_driver(tmp_path)
    assert "checksum mismatch" in drv.state_error
    assert any(p.name.startswith("prepared.json.corrupt") for p in path.parent.iterdir())


def test_restart_removes_temp_files_of_a_killed_writer(tmp_path) -> None:
    write_claim(tmp_path, claim_doc("a", "uid-a", ["loop0"]))
    asyncio.run(make_driver(tmp_path).prepare([A]))
    spec_tmp = tmp_path / "cdi" / ".hwagent.io-claim-uid-b.json.tmp-999999-1"
    state_tmp = tmp_path / "dra-state" / ".prepared.json.tmp-999999-0"
    other = tmp_path / "cdi" / ".vendor.json.tmp-999999-0"  # not ours: left alone
    for p in (spec_tmp, state_tmp, other):
        p.write_text("{")
    make_driver(tmp_path)
    assert not spec_tmp.exists() and not state_tmp.exists() and other.exists()
