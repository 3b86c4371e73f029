"""The real pressure component under asyncio debug mode: every state change it makes in
other components (device health on the board, which wakes ListAndWatch streams through
an asyncio.Event; the CPU policy it reads) happens on the loop, never in a worker thread.

The probes are switched off so no BPF is needed: the sysfs fallback reads TX errors from
a fixture tree, and a growing counter there is what turns a device unhealthy.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from agent.contracts import DaemonContext
from agent.config import section_defaults
from agent.contracts import CPU_POLICY, DEVICE_HEALTH
from agent.deviceplugin.health import HealthBoard
from agent.pressure.component import PressureComponent
from agent.topology.model import synthetic


class LoopOwned:
    """Proxy that records every call made from a thread other than the loop's."""

    def __init__(self, target: Any, loop_thread: int, violations: list[str]) -> None:
        self._target, self._loop_thread, self._violations = target, loop_thread, violations

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*a: Any, **kw: Any) -> Any:
            if threading.get_ident() != self._loop_thread:
                self._violations.append(f"{type(self._target).__name__}.{name} from {threading.current_thread().name}")
            return attr(*a, **kw)

        return call


class NoPods:
    def allocations(self) -> list:
        return []


def _sysfs(tmp_path: Path, errors: int) -> Path:
    stats = tmp_path / "sys" / "class" / "net" / "eth9" / "statistics"
    stats.mkdir(parents=True, exist_ok=True)
    (stats / "tx_errors").write_text(f"{errors}\n")
    return tmp_path / "sys"


def test_health_changes_are_applied_on_the_loop_in_debug_mode(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, 0)
    cfg = (
        section_defaults()
        .replace("daemon", sysfs_root=str(sysfs))
        .replace("pressure", interval_s=0.05, runqlat=False, blockio=False, netdev=False, iommu=False,
                 thermal=False, irq=False, eviction_enabled=False, error_threshold=1)
    )

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        assert loop.get_debug()
        me = threading.get_ident()
        violations: list[str] = []
        errors: list[dict] = []
        loop.set_exception_handler(lambda _l, ctx: errors.append(ctx))
        woken = asyncio.Event()  # what a ListAndWatch stream waits on
        changed: list[set[str]] = []

        def on_change(resources: set[str]) -> None:
            changed.append(resources)
            woken.set()  # from a worker thread, debug mode raises here

        board = HealthBoard(lambda kind, key: [("example.com/nic", "nic-eth9")] if key == "eth9" else [],
                            on_change)
        ctx = DaemonContext(cfg, tmp_path / "root", synthetic(), mode="standalone")
        ctx.publish(DEVICE_HEALTH, LoopOwned(board, me, violations))
        ctx.publish(CPU_POLICY, LoopOwned(NoPods(), me, violations))
        comp = PressureComponent()
        await comp.start(ctx)
        try:
            deadline = time.monotonic() + 60  # generous: the suite shares two CPUs
            while not comp.ready() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert comp.ready(), comp.readiness()
            ticks = 0
            while ticks < 3 and time.monotonic() < deadline:  # a baseline reading of the counter
                await asyncio.sleep(cfg.sections["pressure"].interval_s)
                ticks += 1
            waiter = asyncio.ensure_future(woken.wait())
            await asyncio.sleep(0)
            _sysfs(tmp_path, 7)
            await asyncio.wait_for(waiter, timeout=max(1.0, deadline - time.monotonic()))
            assert changed == [{"example.com/nic"}]
            assert board.health_of("nic-eth9")[0] is False
            assert comp.healthy()
        finally:
            await comp.stop()
        assert violations == [], violations
        assert errors == [], errors

    asyncio.run(scenario(), debug=True)
