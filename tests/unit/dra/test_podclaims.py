"""Standalone pod claims: allocated into the claim's file for the pod, prepared, shared,
released; a refusal changes no file and prepares nothing."""

from __future__ import annotations

import asyncio

import pytest

from agent.dra.claims import ClaimError
from agent.dra.files import ClaimFiles
from agent.dra.podclaims import PodClaimService
from tests.unit.dra.driver_support import claim_doc, make_driver, node_devices, write_claim


def _svc(root, n=2) -> PodClaimService:
    return PodClaimService(make_driver(root, n), ClaimFiles(root), lambda: node_devices(n))


def _snapshot(root) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_reserve_allocates_prepares_and_release_undoes_it(tmp_path) -> None:
    write_claim(tmp_path, claim_doc("disk", "uid-d", None))
    svc = _svc(tmp_path)
    got = asyncio.run(svc.reserve("pod-1", "p1", "default", {"scratch": "disk"}, {"scratch": None}))
    (dev,) = got["scratch"]
    assert dev.device == "loop0" and dev.cdi_device_ids == ("hwagent.io/claim=uid-d-loop0",)
    claim = ClaimFiles(tmp_path).load().claims[("default", "disk")]
    assert [r.device for r in claim.allocation or ()] == ["loop0"]
    assert claim.reserved_for == (("p1", "pod-1"),)
    assert svc.pod_claims("pod-1")["disk"][1] == (dev,)
    # a second pod shares the allocated claim; releasing the first keeps it prepared
    again = asyncio.run(svc.reserve("pod-2", "p2", "default", {"c": "disk"}, {"c": None}))
    assert again["c"] == (dev,)
    asyncio.run(svc.release("pod-1"))
    assert ClaimFiles(tmp_path).load().claims[("default", "disk")].reserved_for == (("p2", "pod-2"),)
    assert "uid-d" in svc.driver.prepared()
    asyncio.run(svc.release("pod-2"))
    claim = ClaimFiles(tmp_path).load().claims[("default", "disk")]
    assert claim.allocation is None and claim.reserved_for == ()
    assert svc.driver.prepared() == {} and list((tmp_path / "cdi").iterdir()) == []


def test_a_refused_pod_changes_nothing(tmp_path) -> None:
    write_claim(tmp_path, claim_doc("one", "uid-1", None))
    write_claim(tmp_path, claim_doc("many", "uid-2", None, count=2))
    svc = _svc(tmp_path, n=2)
    before = _snapshot(tmp_path)
    # "one" fits, then "many" cannot have two of the one device left: both refused together
    with pytest.raises(ClaimError, match="needs 2 device"):
        asyncio.run(svc.reserve("pod-1", "p1", "default", {"a": "one", "b": "many"}, {"a": None, "b": None}))
    assert _snapshot(tmp_path) == before
    assert svc.driver.prepared() == {}
    with pytest.raises(ClaimError, match="no ResourceClaim default/nope"):
        asyncio.run(svc.reserve("pod-1", "p1", "default", {"a": "nope"}, {"a": None}))
    assert _snapshot(tmp_path) == before


def test_two_claims_never_get_one_device(tmp_path) -> None:
    write_claim(tmp_path, claim_doc("a", "uid-a", None))
    write_claim(tmp_path, claim_doc("b", "uid-b", None))
    write_claim(tmp_path, claim_doc("c", "uid-c", None))
    svc = _svc(tmp_path, n=2)
    a = asyncio.run(svc.reserve("p-a", "pa", "default", {"x": "a"}, {"x": None}))["x"]
    b = asyncio.run(svc.reserve("p-b", "pb", "default", {"x": "b"}, {"x": None}))["x"]
    assert {a[0].device, b[0].device} == {"loop0", "loop1"}
    with pytest.raises(ClaimError, match="needs 1 device"):
        asyncio.run(svc.reserve("p-c", "pc", "default", {"x": "c"}, {"x": None}))


def test_views_read_the_claim_files_only_when_they_changed(tmp_path, monkeypatch) -> None:
    """pod_claims (ps, describe, every pod-resources List) answers from memory: the claim files
    are read again only when one of them changed (here: edited behind hwagent's back)."""
    write_claim(tmp_path, claim_doc("disk", "uid-d", None))
    svc = _svc(tmp_path)
    asyncio.run(svc.reserve("pod-1", "p1", "default", {"scratch": "disk"}, {"scratch": None}))
    reads: list[str] = []
    real = ClaimFiles._read
    monkeypatch.setattr(ClaimFiles, "_read", lambda self, dfd, name: reads.append(name) or real(self, dfd, name))
    first = svc.pod_claims("pod-1")
    assert [d.device for d in first["disk"][1]] == ["loop0"]
    n = len(reads)  # at most one reading since reserve wrote the claim's file
    assert n <= 2
    for _ in range(50):
        assert svc.pod_claims("pod-1") == first
    assert len(reads) == n, f"{len(reads) - n} claim file reads by 50 unchanged views"
    # a change to the directory is seen by the next view
    path = tmp_path / "dra" / "disk.json"
    doc = path.read_text().replace('"pod-1"', '"pod-9"')
    path.write_text(doc)
    assert svc.pod_claims("pod-1") == {} and "disk" in svc.pod_claims("pod-9")
    assert len(reads) > n


def test_views_get_a_claim_devices_numa_node_from_the_driver(tmp_path) -> None:
    """ps/describe list a claim's devices with their NUMA nodes as the DRA driver knows them
    (its node devices), as they do a device plugin's from the device manager."""
    import dataclasses

    nd = node_devices(3)
    nd = dataclasses.replace(nd, devices=[dataclasses.replace(d, numa_node=i if i < 2 else None)
                                          for i, d in enumerate(nd.devices)])
    svc = PodClaimService(make_driver(tmp_path, 3), ClaimFiles(tmp_path), lambda: nd)
    assert [svc.device_numa(f"loop{i}") for i in range(3)] == [(0,), (1,), ()]
    assert svc.device_numa("not-a-device") == ()
