"""The NRI component in a daemon context: on with [nri] enabled, publishes its state for
status and its pods for residual cleanup, keeps trying a runtime that is not there."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.config import loads
from agent.contracts import DaemonContext
from agent.contracts.nri import NRI_PLUGIN, NRI_PODS, summary
from agent.nri.component import factory
from agent.topology.model import synthetic


def test_off_unless_enabled(tmp_path: Path) -> None:
    assert factory(DaemonContext(loads(""), tmp_path, synthetic())) is None


def test_started_it_publishes_its_state_and_waits_for_the_runtime(tmp_path: Path) -> None:
    sock = tmp_path / "nri.sock"
    cfg = loads(f'[nri]\nenabled = true\nsocket_path = "{sock}"\nreconnect_interval_s = 0.05\n')
    ctx = DaemonContext(cfg, tmp_path, synthetic(), mode="kubelet")

    async def go() -> None:
        comp = factory(ctx)
        assert comp is not None
        await comp.start(ctx)
        try:
            await asyncio.sleep(0.2)
            assert comp.healthy()
            view = ctx.lookup(NRI_PLUGIN)
            assert view is comp
            st = view.state()
            assert (st["connected"], st["registered"], st["name"]) == (False, False, "90-hwagent")
            assert "No such file" in st["last_error"]
            line = summary(st)
            assert line.startswith(f"waiting for the runtime at {sock}") and "0 adjusted, 0 refused" in line
            pods = ctx.lookup(NRI_PODS)
            assert pods is not None and pods.active_pod_uids() == frozenset()
        finally:
            await comp.stop()
        assert not comp.healthy() and ctx.lookup(NRI_PLUGIN) is None

    asyncio.run(go())
