"""A pod that ended while the daemon was down ends when its shim recorded it, not at the restart
(issue 37 item 12): the event that records the end carries the status' end time, and the
events stay in order."""

from __future__ import annotations

import asyncio

from agent.contracts.pods import AdmittedPod, ContainerSpec, PodPhase, PodSpec, PodStatus
from agent.workloads.registry import Registry
from agent.workloads.store import PodFileStore


def test_the_end_event_is_dated_by_the_status_end(tmp_path) -> None:
    now = [1000.0]
    registry = Registry(PodFileStore(tmp_path / "pods", tmp_path), clock=lambda: now[0])
    spec = PodSpec(name="job", namespace="default", uid="u1", containers=(ContainerSpec("main", ("true",)),))

    async def go() -> None:
        await registry.add(AdmittedPod(spec=spec, qos="shared", assignments={}, admitted_at=1000.0))
        now[0] = 1001.0
        await registry.update("u1", status=PodStatus(phase=PodPhase.RUNNING), line="Running")
        now[0] = 2000.0  # the restart that found the exit written at 1500
        ended = PodStatus(phase=PodPhase.FAILED, reason="Error", finished_at=1500.0)
        await registry.update("u1", status=ended, lines=("Failed (Error)", "resources released (Error)"))
        rec = registry.record("u1")
        assert rec is not None
        assert rec.events[-2:] == ((1500.0, "Failed (Error)"), (2000.0, "resources released (Error)"))
        # a status change that is not the end, and an end time later than the clock, are dated now
        now[0] = 3000.0
        await registry.update("u1", status=PodStatus(phase=PodPhase.FAILED, reason="Error", finished_at=1500.0),
                              line="again")
        assert registry.record("u1").events[-1] == (3000.0, "again")

    asyncio.run(go())


def test_an_end_never_goes_before_the_events_already_recorded(tmp_path) -> None:
    now = [1000.0]
    registry = Registry(PodFileStore(tmp_path / "pods", tmp_path), clock=lambda: now[0])
    spec = PodSpec(name="job", namespace="default", uid="u1", containers=(ContainerSpec("main", ("true",)),))

    async def go() -> None:
        await registry.add(AdmittedPod(spec=spec, qos="shared", assignments={}, admitted_at=1000.0))
        now[0] = 1200.0
        await registry.update("u1", status=PodStatus(phase=PodPhase.FAILED, finished_at=900.0), line="Failed")
        times = [t for t, _ in registry.record("u1").events]
        assert times == sorted(times) and times[-1] == 1000.0

    asyncio.run(go())
