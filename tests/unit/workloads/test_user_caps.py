"""Per-user limits at admission and the logs' life with the pod (issue 32 item 6), on the real
admission and registry (store on disk), with the pods' log directories as a stand-in that
records what it was asked.

A user other than root at ``max_pods_per_user`` (pods in any state) is refused with
RESOURCE_EXHAUSTED naming the limit, and nothing is recorded; concurrent admissions cannot
both take the last place; root is not capped; the log-bytes cap measures the user's pods'
directories. A removal removes the pod's logs; an admission clears a leftover directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent.contracts.pods import ContainerSpec, PodPhase, PodSpec, PodStatus, RunAs
from agent.topologymanager import TopologyManager, TopologyManagerConfig
from agent.workloads.admission import Workloads
from agent.workloads.errors import AdmissionError
from agent.workloads.quota import UserLimits
from agent.workloads.registry import Registry
from agent.workloads.store import PodFileStore
from agent.workloads.users import ROOT, Caller

ALICE = Caller(1500, 1500)


class Logs:
    def __init__(self) -> None:
        self.sizes: dict[tuple[str, str], int] = {}
        self.removed: list[tuple[str, str]] = []

    def remove(self, namespace: str, name: str) -> bool:
        self.removed.append((namespace, name))
        return self.sizes.pop((namespace, name), None) is not None

    def size(self, namespace: str, name: str) -> int:
        return self.sizes.get((namespace, name), 0)

    def exists(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self.sizes


def _spec(name: str, caller: Caller) -> PodSpec:
    run_as = None if caller.root else RunAs(caller.uid, caller.gid, ())
    return PodSpec(name=name, namespace="default", uid=f"uid-{name}", run_as=run_as,
                   containers=(ContainerSpec("main", ("sleep", "300")),))


def _workloads(base: Path, limits: UserLimits, logs: Logs) -> Workloads:
    store = PodFileStore(base / "workloads" / "pods", base)
    tm = TopologyManager(TopologyManagerConfig(policy="none", scope="container"), (0,))
    return Workloads(Registry(store), tm, (0,), limits=limits, logs=logs, user_name=lambda uid: f"user{uid}")


def test_the_pod_cap_counts_every_state_and_refuses_naming_the_limit(tmp_path):
    async def main() -> None:
        w = _workloads(tmp_path, UserLimits(max_pods_per_user=2), Logs())
        await w.admit(_spec("a", ALICE), ALICE)
        await w.admit(_spec("b", ALICE), ALICE)
        await w.pod_status_changed("uid-a", PodStatus(phase=PodPhase.SUCCEEDED))  # ended: still counts
        with pytest.raises(AdmissionError) as e:
            await w.admit(_spec("c", ALICE), ALICE)
        assert e.value.code == "RESOURCE_EXHAUSTED"
        assert e.value.message == ("user user1500 has 2 pods, the limit [workloads] max_pods_per_user is 2; "
                                   "remove ended pods with hwagent rm (hwagent ps lists them)")
        assert sorted(r.key for r in w.registry.records()) == ["default/a", "default/b"]
        assert len(PodFileStore(tmp_path / "workloads" / "pods", tmp_path).load()) == 2
        dry = await w.dry_run(_spec("c", ALICE), ALICE)
        assert not dry.would_admit and "max_pods_per_user is 2" in dry.reason
        # root is not capped, even for a pod that runs as alice; that pod counts for alice
        await w.admit(_spec("r", ALICE), ROOT)
        assert w.registry.pods_of(ALICE.uid) == 3
        await w.remove("a")
        await w.remove("r")
        await w.admit(_spec("c", ALICE), ALICE)
    asyncio.run(main())


def test_concurrent_admissions_cannot_both_take_the_last_place(tmp_path):
    async def main() -> None:
        w = _workloads(tmp_path, UserLimits(max_pods_per_user=3), Logs())
        await w.admit(_spec("a", ALICE), ALICE)
        results = await asyncio.gather(*(w.admit(_spec(f"n{i}", ALICE), ALICE) for i in range(6)),
                                       return_exceptions=True)
        assert sum(not isinstance(r, Exception) for r in results) == 2
        assert all(r.code == "RESOURCE_EXHAUSTED" for r in results if isinstance(r, AdmissionError))
        assert w.registry.pods_of(ALICE.uid) == 3
    asyncio.run(main())


def test_the_log_cap_measures_the_users_pods(tmp_path):
    async def main() -> None:
        logs = Logs()
        w = _workloads(tmp_path, UserLimits(max_log_bytes_per_user=1000), logs)
        await w.admit(_spec("a", ALICE), ALICE)
        await w.admit(_spec("mine", ROOT), ROOT)
        logs.sizes[("default", "a")] = 600
        logs.sizes[("default", "mine")] = 10**9  # root's: not alice's
        await w.admit(_spec("b", ALICE), ALICE)
        logs.sizes[("default", "b")] = 400
        with pytest.raises(AdmissionError) as e:
            await w.admit(_spec("c", ALICE), ALICE)
        assert e.value.code == "RESOURCE_EXHAUSTED"
        assert "user user1500's pods hold 1000 bytes of logs, the limit [workloads] max_log_bytes_per_user is " \
               "1000" in e.value.message
        await w.remove("a")  # its logs go with it
        assert ("default", "a") in logs.removed
        await w.admit(_spec("c", ALICE), ALICE)
    asyncio.run(main())


def test_a_removal_takes_the_logs_and_a_new_pod_starts_without_a_leftover(tmp_path):
    async def main() -> None:
        logs = Logs()
        w = _workloads(tmp_path, UserLimits(), logs)
        logs.sizes[("default", "x")] = 5  # an earlier pod's, its removal interrupted
        await w.admit(_spec("x", ALICE), ALICE)
        assert logs.removed == [("default", "x")] and not logs.exists("default", "x")
        logs.sizes[("default", "x")] = 7
        await w.remove("x")
        assert logs.removed == [("default", "x")] * 2 and not logs.exists("default", "x")
        assert w.registry.by_name("default", "x") is None
    asyncio.run(main())
