"""The memory manager over its journal: changes durable before the answer, the state
back after a restart, corruption refused unless the loss is accepted, a machine that
changed reconciled per pod (never a refusal to start), a failed write undone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent.contracts.hints import TopologyHint
from agent.contracts.memory import MemoryRefused, MemoryRequest
from agent.memory.checkpoint import CheckpointError, MemoryStore
from agent.memory.manager import MemoryManager
from agent.memory.policy import Capacity, StaticPolicy

MB = 1 << 20
GB = 1 << 30


def caps(nodes: int = 2, memory: int = 2 * GB, pages: int = 64 * MB) -> dict[int, dict[str, Capacity]]:
    return {n: {"memory": Capacity(memory, 0, memory), "hugepages-2Mi": Capacity(pages, 0, pages, 2 * MB)}
            for n in range(nodes)}


def open_manager(d: Path, capacity: dict[int, dict[str, Capacity]] | None = None,
                 accept_loss: bool = False) -> tuple[MemoryManager, list]:
    store = MemoryStore(d)
    saved = store.load(accept_loss=accept_loss)
    policy = StaticPolicy(capacity or caps())
    dropped = policy.restore(saved)
    mgr = MemoryManager(policy, store)
    store.save(dict(policy.assignments), lambda: dict(mgr.policy.assignments))
    return mgr, dropped


def req(uid: str, mem: int = GB, pages: int = 8 * MB, hint: TopologyHint | None = None) -> MemoryRequest:
    return MemoryRequest(uid, "c", {"memory": mem, "hugepages-2Mi": pages}, hint=hint)


def test_allocations_and_releases_survive_a_restart(tmp_path: Path) -> None:
    async def run() -> None:
        mgr, _ = open_manager(tmp_path)
        await mgr.allocate(req("a"))
        await mgr.allocate(req("b", hint=TopologyHint(frozenset({1}), True)))
        await mgr.allocate(req("c"))
        assert await mgr.release_pod("c") is True
        assert await mgr.release_pod("nope") is False
        before = (mgr.all_blocks(), mgr.nodes())
        # no compaction, no clean close: what a kill -9 leaves
        mgr2, dropped = open_manager(tmp_path)
        assert dropped == []
        assert (mgr2.all_blocks(), mgr2.nodes()) == before
        assert mgr2.store is not None and mgr2.store.last_recovery is not None
        assert mgr2.store.last_recovery.replayed == 4
        await mgr.store.journal.close()  # type: ignore[union-attr]
        await mgr2.store.journal.close()

    asyncio.run(run())


def test_a_corrupt_snapshot_stops_start_unless_the_loss_is_accepted(tmp_path: Path) -> None:
    async def run() -> None:
        mgr, _ = open_manager(tmp_path)
        await mgr.allocate(req("a"))
        await mgr.store.journal.compact_now()  # type: ignore[union-attr]
        await mgr.store.journal.close()  # type: ignore[union-attr]

    asyncio.run(run())
    p = tmp_path / "memory_manager_state.json"
    p.write_bytes(p.read_bytes().replace(b'"size":', b'"size":1', 1))
    with pytest.raises(CheckpointError, match="accept_state_loss"):
        open_manager(tmp_path)
    mgr, _ = open_manager(tmp_path, accept_loss=True)
    assert mgr.all_blocks() == {}
    assert list(tmp_path.glob("memory_manager_state.json.corrupt-*"))


def test_a_machine_that_changed_is_reconciled_per_pod(tmp_path: Path) -> None:
    async def run() -> None:
        mgr, _ = open_manager(tmp_path, caps(nodes=2))
        await mgr.allocate(req("on0", hint=TopologyHint(frozenset({0}), True)))
        await mgr.allocate(req("on1", hint=TopologyHint(frozenset({1}), True)))
        await mgr.store.journal.close()  # type: ignore[union-attr]

    asyncio.run(run())
    # node 1 was removed (memory hot-unplugged) while hwagent was down: start, and say which pod lost what
    mgr, dropped = open_manager(tmp_path, caps(nodes=1))
    assert [(a.pod_uid, "node 1" in why) for a, why in dropped] == [("on1", True)]
    assert set(k[0] for k in mgr.all_blocks()) == {"on0"}
    # the reconciled state is what was saved: a second start finds nothing to drop
    mgr2, dropped2 = open_manager(tmp_path, caps(nodes=1))
    assert dropped2 == [] and set(k[0] for k in mgr2.all_blocks()) == {"on0"}


def test_reconcile_on_a_running_manager_drops_and_journals(tmp_path: Path) -> None:
    async def run() -> None:
        mgr, _ = open_manager(tmp_path, caps(pages=64 * MB))
        await mgr.allocate(req("a", pages=32 * MB, hint=TopologyHint(frozenset({0}), True)))
        await mgr.allocate(req("b", pages=32 * MB, hint=TopologyHint(frozenset({1}), True)))
        dropped = mgr.reconcile({0: caps()[0], 1: {"memory": Capacity(2 * GB, 0, 2 * GB),
                                                    "hugepages-2Mi": Capacity(16 * MB, 0, 16 * MB, 2 * MB)}})
        assert [a.pod_uid for a, _ in dropped] == ["b"]
        await mgr.store.journal.drain()  # type: ignore[union-attr]
        mgr2, _ = open_manager(tmp_path)
        assert set(k[0] for k in mgr2.all_blocks()) == {"a"}
        await mgr.store.journal.close()  # type: ignore[union-attr]
        await mgr2.store.journal.close()  # type: ignore[union-attr]

    asyncio.run(run())


def test_a_write_that_fails_undoes_the_allocation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> None:
        mgr, _ = open_manager(tmp_path)
        empty = mgr.nodes()
        journal = mgr.store.journal  # type: ignore[union-attr]

        def broken(data: bytes) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(journal, "_append_sync", broken)
        with pytest.raises(MemoryRefused) as e:
            await mgr.allocate(req("a"))
        assert e.value.reason == "state_not_persisted"
        assert mgr.nodes() == empty and mgr.all_blocks() == {}
        await journal.close()

    asyncio.run(run())
