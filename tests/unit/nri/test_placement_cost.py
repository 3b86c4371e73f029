"""What one NRI event costs the placer, as the node fills: the answer to a CreateContainer
reads back only the containers the CPU policy moved, not every container it placed
(issue 34: the cost flat in the number of containers), and still tells every one that did
move. Over the real owners (the CPU policy with its journal, the topology manager); the
policy is only counted (how many placements the placer reads back), not replaced."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.cpuset import CPUSet
from agent.nri.placement import Placer
from tests.unit.nri.test_placement import _end_ramp_up, nri_container, on_node
from tests.unit.workloads.admission_node import Node

#: containers on the node before the one timed
KNOWN = 150


class Counted:
    """The CPU policy, every ``placement`` read counted."""

    def __init__(self, policy: Any) -> None:
        self._p, self.reads = policy, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._p, name)

    def placement(self, pod_uid: str, container: str) -> Any:
        self.reads += 1
        return self._p.placement(pod_uid, container)


async def _fill(node: Node) -> tuple[Placer, Counted]:
    counted = Counted(node._engine)
    placer = Placer(node.workloads.topology_manager, cpu_policy=counted)  # type: ignore[arg-type]
    for i in range(KNOWN):
        d = await placer.create(*nri_container(f"b{i}", f"/kubepods/burstable/podb{i}", shares=20))
        assert d.outcome == "adjusted"
    placer.pending_updates()  # the runtime is told where each one is
    return placer, counted


def test_a_create_reads_back_what_moved_not_every_placed_container() -> None:
    async def body(node: Node, _: Placer) -> None:
        placer, counted = await _fill(node)
        counted.reads = 0
        d = await placer.create(*nri_container("new", "/kubepods/burstable/podnew", shares=20))
        ups = placer.pending_updates(exclude="ct-new-main")
        assert d.outcome == "adjusted" and ups == []  # a ramp-up container moves no other one
        assert counted.reads <= 4, f"{counted.reads} placements read back for one create among {KNOWN}"

    on_node(body)


def test_a_pool_shrink_still_reaches_every_moved_container_and_only_them() -> None:
    async def body(node: Node, _: Placer) -> None:
        placer, counted = await _fill(node)
        _end_ramp_up(node)  # every shared container joins its pool
        placer.pending_updates()
        counted.reads = 0
        # a Guaranteed pod with 2 whole CPUs: dedicated, the shared pool shrinks under the others
        ded = await placer.create(*nri_container("d", "/kubepods/podd", shares=2048, quota=200_000))
        assert ded.outcome == "adjusted" and ded.cpus is not None
        moved = placer.pending_updates(exclude="ct-d-main")
        assert {u.container_id for u in moved} == {f"ct-b{i}-main" for i in range(KNOWN)}
        assert all(not CPUSet.parse(u.linux.resources.cpu.cpus) & ded.cpus for u in moved)
        assert placer.pending_updates() == []  # told once
        assert counted.reads <= KNOWN + 4

    on_node(body)


def _running(n: int) -> tuple[list[Any], list[Any]]:
    """``n`` running Burstable containers, one per pod, as the runtime's Synchronize lists them."""
    pods, ctrs = [], []
    for i in range(n):
        pod, ctr = nri_container(f"s{i}", f"/kubepods/burstable/pods{i}", shares=20, state=nri.CONTAINER_RUNNING)
        pods.append(pod)
        ctrs.append(ctr)
    return pods, ctrs


def test_a_synchronize_of_many_containers_waits_for_a_few_fdatasyncs_not_one_each() -> None:
    async def body(node: Node, placer: Placer) -> None:
        journal = node._engine.store.journal
        before = journal.syncs
        updates, _, decisions = await placer.synchronize(*_running(KNOWN))
        assert [d.outcome for d in decisions] == ["adjusted"] * KNOWN
        assert len(updates) == KNOWN  # the runtime reported no cpuset: each one is told
        assert journal.durable_seq == journal.seq  # answered once every record is on disk
        syncs = journal.syncs - before
        assert syncs <= 3, f"{syncs} fdatasyncs for a Synchronize of {KNOWN} containers"
        # and each placement is what a restart reads back from the journal
        await node.restart()
        again = Placer(node.workloads.topology_manager, cpu_policy=node._engine)
        assert all(again.held(f"s{i}", "main") for i in range(KNOWN))

    on_node(body)


def test_a_synchronize_whose_records_fail_tells_the_runtime_nothing_that_does_not_hold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def body(node: Node, placer: Placer) -> None:
        journal = node._engine.store.journal

        def broken(data: bytes) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(journal, "_append_sync", broken)
        updates, _, decisions = await placer.synchronize(*_running(20))
        assert updates == []
        assert {d.outcome for d in decisions} == {"refused"}
        assert len(placer.unadjusted) == 20 and not placer.placed  # repaired later
        assert node._engine.allocations() == []  # the owners undid every change

    on_node(body)


def test_only_the_synchronizing_task_defers_its_records() -> None:
    """Another caller on the loop (an admission, a task the synchronize starts) still waits
    for its own change to be durable while a Synchronize's batch is open."""
    from agent.journalbatch import deferred
    from tests.unit.cpu.helpers import req

    async def body(node: Node, placer: Placer) -> None:
        engine, journal = node._engine, node._engine.store.journal
        with deferred() as batch:
            await engine.allocate(req("mine", "c", "shared_cores", cpus=0.1))
            assert journal.durable_seq < journal.seq  # answered before its record is on disk
            await asyncio.create_task(engine.allocate(req("other", "c", "shared_cores", cpus=0.1)))
            assert journal.durable_seq == journal.seq  # the other task waited for its own (and so mine)
        assert await batch.settle() == []

    on_node(body)
