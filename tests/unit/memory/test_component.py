"""The memory component on a fixture sysfs: publishes MEMORY_MANAGER, restores what fits, drops
(and reports per pod) what no longer fits after the machine changed while it was down, and
reconciles a hugepage pool resized while it runs; a bad reservation stops start with the reason."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from agent.config import loads
from agent.contracts import MEMORY_MANAGER, DaemonContext
from agent.contracts.hints import TopologyHint
from agent.contracts.memory import MemoryRequest
from agent.memory.component import MemoryComponent, create
from agent.memory.config import MEMORY_SECTION
from agent.topology.model import synthetic

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "memory"
MB = 1 << 20
POOL = "devices/system/node/node{}/hugepages/hugepages-2048kB/nr_hugepages"


def context(tmp_path: Path, sysfs: Path, extra: str = "") -> DaemonContext:
    cfg = loads(f'[daemon]\nsysfs_root = "{sysfs}"\n[memory]\nrescan_interval_s = 3600\n{extra}')
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    return DaemonContext(cfg, root, synthetic(), mode="standalone")


def test_start_restore_reconcile(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sysfs = tmp_path / "sys"
    shutil.copytree(FIX / "numa2" / "sys", sysfs)

    async def first() -> None:
        ctx = context(tmp_path, sysfs)
        comp = create(ctx)
        assert isinstance(comp, MemoryComponent)
        await comp.start(ctx)
        mm = ctx.lookup(MEMORY_MANAGER)
        assert mm is comp.manager
        await mm.allocate(MemoryRequest("on0", "c", {"hugepages-2Mi": 64 * MB}, hint=TopologyHint(frozenset({0}), True)))
        await mm.allocate(MemoryRequest("on1", "c", {"hugepages-2Mi": 600 * MB},
                                        hint=TopologyHint(frozenset({1}), True)))
        await comp.stop()

    asyncio.run(first())
    # while hwagent was down, node 1's pool was shrunk to 128 pages (256 MiB): on1 no longer fits
    (sysfs / POOL.format(1)).write_text("128\n")

    async def second() -> None:
        ctx = context(tmp_path, sysfs)
        comp = MemoryComponent(ctx.config[MEMORY_SECTION])
        with caplog.at_level("WARNING", logger="hwagent.memory"):
            await comp.start(ctx)
        assert [a.pod_uid for a, _ in comp.last_dropped] == ["on1"]
        dropped_events = [dict(getattr(r, "fields", {})) for r in caplog.records
                          if r.getMessage() == "memory placement dropped"]
        assert [(e["pod_uid"], e["container"], e["when"]) for e in dropped_events] == [("on1", "c", "start")]
        assert "hugepages-2Mi on node 1" in dropped_events[0]["why"]
        assert {k[0] for k in comp.manager.all_blocks()} == {"on0"}
        # running: node 0's pool shrinks below what on0 holds; the re-read drops it
        (sysfs / POOL.format(0)).write_text("16\n")
        dropped = await comp.rescan_once()
        assert [a.pod_uid for a, _ in dropped] == ["on0"]
        assert comp.manager.all_blocks() == {}
        assert await comp.rescan_once() == []  # unchanged machine: nothing to do
        await comp.stop()

    asyncio.run(second())


def test_a_reservation_the_machine_cannot_hold_stops_start(tmp_path: Path) -> None:
    ctx = context(tmp_path, FIX / "numa2" / "sys", 'reserved_memory = ["7:memory=1Gi"]\n')
    comp = create(ctx)
    assert comp is not None
    with pytest.raises(RuntimeError, match="NUMA node 7"):
        asyncio.run(comp.start(ctx))


def test_policy_none_runs_no_component(tmp_path: Path) -> None:
    assert create(context(tmp_path, FIX / "numa2" / "sys", 'policy = "none"\n')) is None
