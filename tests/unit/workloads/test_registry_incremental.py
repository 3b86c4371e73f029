"""Admission's change path costs the same with 10 pods or 10,000 (issue 24): the
admitted-pods gauge and the active-pods set are kept up to date per change,
never recounted over every record. Their values stay those of a full recount
after every admission, status change, release, reservation and removal."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import REGISTRY

from agent.contracts.pods import AdmittedPod, ContainerSpec, PodPhase, PodSpec, PodStatus
from agent.topologymanager import TopologyManager, TopologyManagerConfig
from agent.workloads.admission import Workloads
from agent.workloads.registry import Registry
from agent.workloads.store import PodFileStore, PodRecord

QOS = ("shared", "dedicated", "reclaimed", "system")


class CountingDict(dict):
    """The registry's records; counts every pass over all of them."""

    walks = 0

    def values(self):
        CountingDict.walks += 1
        return super().values()

    def items(self):
        CountingDict.walks += 1
        return super().items()

    def keys(self):
        CountingDict.walks += 1
        return super().keys()

    def __iter__(self):
        CountingDict.walks += 1
        return super().__iter__()


def _record(i: int, phase: PodPhase = PodPhase.RUNNING) -> PodRecord:
    spec = PodSpec(name=f"bg-{i}", namespace="default", uid=f"uid-bg-{i}",
                   containers=(ContainerSpec("main", ("sleep", "300")),))
    pod = AdmittedPod(spec=spec, qos=QOS[i % 4], assignments={}, admitted_at=1.0)
    return PodRecord(pod, PodStatus(phase=phase))


def _recount(records: dict[str, PodRecord]) -> tuple[dict[str, int], frozenset[str]]:
    counts = dict.fromkeys(QOS, 0)
    live = set()
    for uid, r in dict.items(records):
        if not r.status.phase.terminal:
            counts[r.pod.qos] += 1
            live.add(uid)
    return counts, frozenset(live)


def _gauge() -> dict[str, int]:
    return {q: int(REGISTRY.get_sample_value("hwagent_workloads_admitted_pods", {"qos": q}) or 0) for q in QOS}


def _manifest(name: str) -> bytes:
    return (b'{"metadata": {"name": "%s"}, "spec": {"containers": [{"name": "c", "command": ["sleep", "1"]}]}}'
            % name.encode())


def test_changes_keep_counts_and_active_set_without_a_pass_over_every_pod(tmp_path: Path):
    async def main() -> None:
        registry = Registry(PodFileStore(tmp_path / "pods", tmp_path))
        registry.restore([_record(i, PodPhase.SUCCEEDED if i % 7 == 0 else PodPhase.RUNNING) for i in range(300)])
        tm = TopologyManager(TopologyManagerConfig(policy="none", scope="container"), (0,))
        w = Workloads(registry, tm, (0,))
        records = CountingDict(registry._records)
        registry._records = records

        def check(step: str) -> None:
            counts, live = _recount(records)
            assert _gauge() == counts, step
            assert registry.active_pod_uids() == live | registry._reserved_uids, step

        check("restored")
        CountingDict.walks = 0
        for i in range(3):
            await w.admit_manifest(_manifest(f"new-{i}"))
            check(f"admitted new-{i}")
        registry.reserve("default/pending", "uid-pending")
        check("reserved")
        assert "uid-pending" in registry.active_pod_uids()
        registry.unreserve("default/pending", "uid-pending")
        check("unreserved")
        uid = w.find("new-0").uid
        await w.pod_status_changed(uid, PodStatus(phase=PodPhase.RUNNING))
        check("running")
        await w.pod_status_changed(uid, PodStatus(phase=PodPhase.FAILED, reason="Error"))
        check("failed")
        assert uid not in registry.active_pod_uids()
        await w.remove("new-0")
        check("removed a terminal pod")
        await w.remove("new-1")
        check("removed a live pod")
        await w.remove("bg-1")
        check("removed a restored pod")
        await w.remove("bg-7")
        check("removed a restored terminal pod")
        # the checks ask for the active set after every change too (the recount reads the dict raw)
        assert CountingDict.walks == 0, f"{CountingDict.walks} passes over every record"

    asyncio.run(asyncio.wait_for(main(), 60))
