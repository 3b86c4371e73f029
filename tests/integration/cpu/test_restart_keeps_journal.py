"""A start keeps the snapshot and journal it recovered instead of rewriting the whole
snapshot on the READY path (issue 24: 209 ms at 10,000 pods), and compacts later,
through the journal's writer, on the first periodic pass; a start whose policy differs
from what it read (the reserve changed) still writes a snapshot at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import agent.journal as journal_mod
from agent.contracts import CPU_POLICY
from agent.contracts.cpu import Request
from agent.cpu.calculator import TopoIndex
from agent.cpu.checkpoint import CheckpointStore
from agent.cpu.durable import DurablePolicy
from agent.cpu.component import options_from_config
from agent.cpu.policy import DynamicPolicy
from agent.cpuset import CPUSet
from agent.config import section_defaults
from agent.topology.model import synthetic

from .common import component, make_ctx

TOPO = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)


def killed_daemon_state(root: Path, pods: list[str]) -> None:
    """What a daemon killed after journaling ``pods`` leaves: a snapshot and a journal
    of records (closed without the clean stop's compaction)."""
    store = CheckpointStore(root / "cpu", online=TopoIndex(TOPO).all)
    options = options_from_config(section_defaults().sections["cpu"], len(TOPO.online))
    policy = DynamicPolicy(TOPO, options)
    store.save(policy.state)

    async def main() -> None:
        engine = DurablePolicy(policy, store)
        for uid in pods:
            await engine.allocate(Request(pod_uid=uid, container_name="c", resource_requests={"cpu": 1}))
        await store.journal.close()

    asyncio.run(main())


class Writes:
    """Counts snapshot writes (agent.journal writes every snapshot through write_atomic)."""

    def __init__(self, monkeypatch) -> None:
        self.paths: list[Path] = []
        real = journal_mod.write_atomic

        def counting(path, data, *a, **kw):
            self.paths.append(Path(path))
            return real(path, data, *a, **kw)

        monkeypatch.setattr(journal_mod, "write_atomic", counting)


def test_a_start_after_a_kill_writes_no_snapshot_and_compacts_on_the_first_pass(tmp_path, monkeypatch):
    root = tmp_path / "root"
    killed_daemon_state(root, ["a", "b"])
    wal = root / "cpu" / "cpu_plugin_state.json.wal"
    assert wal.stat().st_size > 0
    writes = Writes(monkeypatch)
    ctx = make_ctx(root, TOPO, tmp_path / "cg", enforce_cgroups=False)

    async def main() -> None:
        comp = component(ctx)
        await comp.start(ctx)
        try:
            svc = ctx.lookup(CPU_POLICY)
            assert sorted(a.pod_uid for a in svc.allocations()) == ["a", "b"]
            assert writes.paths == []  # the journal was kept, not folded into a new snapshot
            await svc.allocate(Request(pod_uid="c", container_name="c", resource_requests={"cpu": 1}))
            assert writes.paths == []  # appended to the kept journal
            await comp.check_once()  # the first periodic pass (after READY) compacts
            await comp.durable.store.journal.drain()
            assert writes.paths == [root / "cpu" / "cpu_plugin_state.json"]
            await comp.check_once()  # once: a later pass with nothing replayed writes nothing
            await comp.durable.store.journal.drain()
            assert len(writes.paths) == 1
        finally:
            await comp.stop()
        # what the kept journal, the compaction and the later record hold survives a restart
        comp2 = component(ctx)
        await comp2.start(ctx)
        try:
            assert sorted(a.pod_uid for a in ctx.lookup(CPU_POLICY).allocations()) == ["a", "b", "c"]
        finally:
            await comp2.stop()

    asyncio.run(main())


def test_a_start_after_a_clean_stop_writes_nothing_until_a_change(tmp_path, monkeypatch):
    root = tmp_path / "root"
    killed_daemon_state(root, ["a"])
    ctx = make_ctx(root, TOPO, tmp_path / "cg", enforce_cgroups=False)

    async def main() -> None:
        comp = component(ctx)
        await comp.start(ctx)
        await comp.stop()  # a clean stop: one snapshot, no journal
        writes = Writes(monkeypatch)
        comp2 = component(ctx)
        await comp2.start(ctx)
        try:
            await comp2.check_once()
            await comp2.durable.store.journal.drain()
            assert writes.paths == []  # nothing replayed: nothing to compact
            assert [a.pod_uid for a in ctx.lookup(CPU_POLICY).allocations()] == ["a"]
        finally:
            await comp2.stop()

    asyncio.run(main())


def test_a_start_whose_pools_differ_from_the_file_writes_the_snapshot_at_once(tmp_path, monkeypatch):
    root = tmp_path / "root"
    killed_daemon_state(root, ["a"])
    store = CheckpointStore(root / "cpu", online=TopoIndex(TOPO).all)
    st = store.load()
    assert st is not None
    store.save(st.with_pools({**st.pools, "gone": CPUSet.parse("7")}))  # a pool no container names any more
    writes = Writes(monkeypatch)
    ctx = make_ctx(root, TOPO, tmp_path / "cg", enforce_cgroups=False)

    async def main() -> None:
        comp = component(ctx)
        await comp.start(ctx)
        try:
            # the start dropped the pool: memory is not snapshot + journal, so the start writes it
            assert "gone" not in comp.durable.policy.state.pools
            assert writes.paths == [root / "cpu" / "cpu_plugin_state.json"]
        finally:
            await comp.stop()
        loaded = CheckpointStore(root / "cpu", online=TopoIndex(TOPO).all).load(read_only=True)
        assert loaded is not None and "gone" not in loaded.pools

    asyncio.run(main())
