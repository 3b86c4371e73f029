"""List in pages (issue 24): ``hwagent ps`` failed past about 2,800 pods because List was one
reply of every pod with its whole record. A page is built from the registry's ordered keys
(no pass over every record), holds the summary form when asked (no events, no record), and
the pages together list every pod exactly once in (namespace, name) order; a client that
sends no limit gets every pod in full, as before."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from agent.api.admission.v1 import api_pb2 as pb
from agent.contracts.pods import AdmittedPod, ContainerSpec, PodPhase, PodSpec, PodStatus, RunAs
from agent.topologymanager import TopologyManager, TopologyManagerConfig
from agent.workloads.admission import Workloads
from agent.workloads.errors import AdmissionError
from agent.workloads.paging import take_page, token_key
from agent.workloads.registry import Registry
from agent.workloads.server import AdmissionServicer
from agent.workloads.store import PodFileStore, PodRecord
from agent.workloads.users import Caller
from tests.unit.workloads.test_registry_incremental import CountingDict, _manifest


def _record(ns: str, name: str, owner: int = 0) -> PodRecord:
    spec = PodSpec(name=name, namespace=ns, uid=f"uid-{ns}-{name}", containers=(ContainerSpec("c", ("sleep", "1")),),
                   run_as=RunAs(uid=owner, gid=owner) if owner else None)
    pod = AdmittedPod(spec=spec, qos="shared", assignments={}, admitted_at=1.0)
    return PodRecord(pod, PodStatus(phase=PodPhase.RUNNING), events=((1.0, "admitted"),))


# "a-b" sorts before "a" as the string "a-b/x" < "a/x" would not: the order is (namespace, name)
KEYS = [("a", "p1"), ("a", "p2"), ("a-b", "p0"), ("default", "w-1"), ("default", "w-2"), ("z", "last")]


def _servicer(tmp_path: Path, records: list[PodRecord], caller: Caller | None = None):
    registry = Registry(PodFileStore(tmp_path / "pods", tmp_path))
    registry.restore(records)
    w = Workloads(registry, TopologyManager(TopologyManagerConfig(policy="none", scope="container"), (0,)), (0,))
    return AdmissionServicer(w, lambda: [("/m/bad.yaml", "no")], caller_of=lambda _ctx: caller or Caller(0, 0)), w


async def _all_pages(api: AdmissionServicer, limit: int, summary: bool = True) -> list[pb.ListResponse]:
    out, token = [], ""
    while True:
        resp = await api.List(pb.ListRequest(limit=limit, page_token=token, summary=summary), None)
        out.append(resp)
        token = resp.next_page_token
        if not token:
            return out


def test_pages_list_every_pod_once_in_order_without_a_pass_over_every_record(tmp_path: Path) -> None:
    async def main() -> None:
        api, w = _servicer(tmp_path, [_record(ns, n) for ns, n in reversed(KEYS)])
        w.registry._records = records = CountingDict(w.registry._records)
        CountingDict.walks = 0
        pages = await _all_pages(api, 4)
        assert CountingDict.walks == 0, f"{CountingDict.walks} passes over every record for a page"
        assert [len(p.pods) for p in pages] == [4, 2]  # the last page is never an empty one
        assert [(p.namespace, p.name) for page in pages for p in page.pods] == KEYS
        assert [len(p.manifest_errors) for p in pages] == [1, 0]  # the first page has them
        summary = pages[0].pods[0]
        assert summary.record_json == "" and not summary.events and summary.phase == "Running"
        # an older client: no limit, every pod in full, in one reply
        whole = await api.List(pb.ListRequest(), None)
        assert [(p.namespace, p.name) for p in whole.pods] == KEYS and whole.next_page_token == ""
        assert all(p.record_json and list(p.events) for p in whole.pods)
        assert len(records) == len(KEYS)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_pod_added_or_removed_between_pages_does_not_shift_the_others(tmp_path: Path) -> None:
    async def main() -> None:
        api, w = _servicer(tmp_path, [_record(ns, n) for ns, n in KEYS])
        first = await api.List(pb.ListRequest(limit=3, summary=True), None)
        assert first.next_page_token == "a-b/p0"
        await w.remove("p1", "a")  # already listed
        await w.admit_manifest(_manifest("w-0"))  # default/w-0: after the token, listed next
        rest = await api.List(pb.ListRequest(limit=10, page_token=first.next_page_token, summary=True), None)
        assert [(p.namespace, p.name) for p in rest.pods] == [("default", "w-0")] + KEYS[3:]

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_user_pages_through_its_own_pods_only(tmp_path: Path) -> None:
    async def main() -> None:
        recs = [_record(ns, n, owner=1000 if i % 2 else 0) for i, (ns, n) in enumerate(KEYS)]
        api, _ = _servicer(tmp_path, recs, Caller(1000, 1000))
        pages = await _all_pages(api, 2)
        assert [(p.namespace, p.name) for page in pages for p in page.pods] == KEYS[1::2]
        assert [len(p.pods) for p in pages] == [2, 1]
        assert not any(p.manifest_errors for p in pages)  # root's

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize("token", ["nope", "/x", "a/", "a/b/c"])
def test_a_token_no_reply_gave_is_refused(tmp_path: Path, token: str) -> None:
    api, _ = _servicer(tmp_path, [_record("a", "p1")])
    with pytest.raises(AdmissionError) as e:
        asyncio.run(AdmissionServicer.List.__wrapped__(api, pb.ListRequest(limit=1, page_token=token), None))
    assert e.value.code == "INVALID_ARGUMENT" and "first page" in e.value.message


def test_take_page_is_pure_and_refuses_a_negative_limit() -> None:
    keys = [("a", str(i)) for i in range(5)]
    assert take_page(keys, dict.fromkeys(keys, 1).get, lambda _: True, 5) == ([1] * 5, "")
    assert take_page(keys, dict.fromkeys(keys, 1).get, lambda _: True, 2) == ([1, 1], "a/1")
    assert token_key("a/1") == ("a", "1") and token_key("") is None
    with pytest.raises(AdmissionError):
        take_page(keys, dict.fromkeys(keys, 1).get, lambda _: True, -1)


def test_the_order_follows_renames_and_restores(tmp_path: Path) -> None:
    registry = Registry(PodFileStore(tmp_path / "pods", tmp_path))
    recs = [_record(ns, n) for ns, n in KEYS]
    registry.restore(recs)
    registry._set(recs[0].uid, None)
    moved = dataclasses.replace(recs[1], pod=dataclasses.replace(
        recs[1].pod, spec=dataclasses.replace(recs[1].pod.spec, name="zz")))
    registry._set(moved.uid, moved)
    assert list(registry.keys_after(None)) == sorted(KEYS[2:] + [("a", "zz")])
    assert list(registry.keys_after(("default", "w-1"))) == [("default", "w-2"), ("z", "last")]
