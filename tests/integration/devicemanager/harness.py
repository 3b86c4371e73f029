"""Run a real host (DeviceManager + Registration server) on unix sockets in a test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from agent.devicemanager.manager import DeviceManager
from agent.devicemanager.registration import RegistrationServer
from agent.pods import ActivePods

RES = "example.com/fake"
RES2 = "example.com/other"


def run(coro, timeout: float = 60.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def until(cond: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@dataclass
class Host:
    manager: DeviceManager
    registration: RegistrationServer
    plugins_dir: Path

    @property
    def socket(self) -> str:
        return str(self.registration.socket_path)

    def sock(self, name: str) -> str:
        return str(self.plugins_dir / name)

    def cap(self, resource: str = RES) -> tuple[int, int]:
        cap, alloc, _ = self.manager.capacity()
        return cap.get(resource, -1), alloc.get(resource, -1)


@asynccontextmanager
async def host(
    base: Path,
    *,
    numa_ids: Iterable[int] = (0, 1),
    grace: float = 300.0,
    active_pods: ActivePods | None = None,
    prestart_timeout: float = 30.0,
    checkpoint: bool = True,
    dial_timeout: float = 5.0,
):
    plugins_dir = base / "dp"
    plugins_dir.mkdir(exist_ok=True)
    mgr = DeviceManager(
        numa_ids=numa_ids,
        checkpoint_path=plugins_dir / "checkpoint" if checkpoint else None,
        active_pods=active_pods,
        stop_grace_seconds=grace,
        prestart_timeout_seconds=prestart_timeout,
        dial_timeout_seconds=dial_timeout,
        allocate_timeout_seconds=10.0,
    )
    await mgr.start()
    reg = RegistrationServer(mgr, plugins_dir, "registration.sock", reserved={"checkpoint"})
    await reg.start()
    try:
        yield Host(mgr, reg, plugins_dir)
    finally:
        await reg.stop()
        await mgr.stop()
