"""Releasing a pod writes the device checkpoint only when the pod held devices.

A pod's release used to compact the device manager's journal (a snapshot written and
synced) for every pod, devices or none: about a third of the fsyncs of a
``hwagent launch --wait -- true`` (strace, docs/performance.md). A pod that held no
device changes nothing the checkpoint keeps; one that held devices still has its release
durable before the registry says released, which a restart shows.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.unit.workloads.admission_node import MACHINES, Node

RES = "example.com/dev"


def manifest(name: str, devices: int = 0) -> str:
    limits = {"cpu": "1"} | ({RES: str(devices)} if devices else {})
    return json.dumps({"metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "command": ["sleep", "1"], "resources": {"limits": limits}}]}})


def test_a_pod_without_devices_is_released_without_a_device_checkpoint(tmp_path: Path) -> None:
    async def main() -> None:
        node = await Node(tmp_path, MACHINES[0], "best-effort", "container").start()
        try:
            w = node.workloads
            plain = (await w.admit_manifest(manifest("plain"))).pod
            dev = (await w.admit_manifest(manifest("dev", devices=1))).pod
            flushes = []
            real = node.manager.flush_checkpoint

            async def counted() -> None:
                flushes.append(1)
                await real()

            node.manager.flush_checkpoint = counted  # type: ignore[method-assign]
            await w.release(plain.uid, "test")
            assert flushes == [], "a pod with no devices compacted the device checkpoint"
            assert w.registry.record(plain.uid).released
            await w.release(dev.uid, "test")
            assert flushes == [1], "a pod with devices must have its release durable"
            assert node.manager.container_allocations(dev.uid) == {}
            await node.restart()
            assert node.manager.container_allocations(dev.uid) == {}, "the release did not survive a restart"
            assert node.workloads.registry.record(dev.uid).released
        finally:
            await node.stop()

    asyncio.run(main())


def test_removing_an_ended_and_released_pod_deletes_its_record_without_an_intent_write(tmp_path: Path) -> None:
    """The removal intent (a synced record write) is there so that a daemon killed while a pod is
    being stopped finishes the removal after its restart; a pod that already ended and gave its
    resources back has nothing to stop, so its removal is the record's deletion alone. A pod
    still running keeps its intent written before anything is stopped."""
    from agent.contracts.pods import PodPhase, PodStatus

    async def main() -> None:
        node = await Node(tmp_path, MACHINES[0], "best-effort", "container").start()
        try:
            w = node.workloads
            ended = (await w.admit_manifest(manifest("ended"))).pod
            running = (await w.admit_manifest(manifest("running"))).pod
            await w.pod_status_changed(ended.uid, PodStatus(phase=PodPhase.SUCCEEDED, reason="Completed"))
            assert w.registry.record(ended.uid).released
            puts = []
            real = w.registry.store.put

            def counted(rec) -> None:
                puts.append((rec.pod.spec.name, rec.removing))
                real(rec)

            w.registry.store.put = counted  # type: ignore[method-assign]
            await w.remove("ended")
            assert puts == [], f"an ended, released pod's removal wrote its record: {puts}"
            assert w.registry.record(ended.uid) is None
            await w.remove("running")
            assert puts[0] == ("running", True), f"a running pod's removal intent must be written first: {puts}"
            assert w.registry.record(running.uid) is None
            await node.restart()
            assert {r.pod.spec.name for r in node.workloads.registry.records()} == set()
        finally:
            await node.stop()

    asyncio.run(main())


def test_a_terminal_report_writes_the_record_once_with_its_release(tmp_path: Path) -> None:
    """A pod's end and its release are one registry write (status and released together, after
    the CPUs and devices were given back), not one write for the end and one for the release:
    two temp files, fsyncs, renames and directory fsyncs per job (issue 23). Waiters still hear
    of the end: one MODIFIED event, terminal and released."""
    from agent.contracts.pods import PodPhase, PodStatus

    async def main() -> None:
        node = await Node(tmp_path, MACHINES[0], "best-effort", "container").start()
        try:
            w = node.workloads
            pod = (await w.admit_manifest(manifest("job"))).pod
            puts = []
            real = w.registry.store.put

            def counted(rec) -> None:
                puts.append((rec.status.phase, rec.released))
                real(rec)

            w.registry.store.put = counted  # type: ignore[method-assign]
            events = []
            w.registry.listeners.append(lambda ev: events.append((ev.type, ev.record.status.phase, ev.record.released)))
            await w.pod_status_changed(pod.uid, PodStatus(phase=PodPhase.SUCCEEDED, reason="Completed"))
            assert puts == [(PodPhase.SUCCEEDED, True)], f"the end and the release were not one write: {puts}"
            assert events == [("MODIFIED", PodPhase.SUCCEEDED, True)], events
            rec = w.registry.record(pod.uid)
            assert [line for _t, line in rec.events][-2:] == ["Succeeded (Completed)", "resources released (Completed)"]
            assert pod.uid not in {a.pod_uid for a in node._engine.allocations()}
            await node.restart()
            again = node.workloads.registry.record(pod.uid)
            assert again.status.phase == PodPhase.SUCCEEDED and again.released
        finally:
            await node.stop()

    asyncio.run(main())


def test_a_kill_between_the_release_and_the_record_write_ends_the_pod_after_the_restart(tmp_path: Path) -> None:
    """The window the single write opens: the CPU policy's release is durable, the record still
    says Running when the daemon dies (here: its write fails as a kill would leave it, nothing on
    disk). After the restart the record is Running and unreleased; the runtime, whose own files
    still hold the exit, reports the end again, and that report ends and releases the pod once."""
    from agent.contracts.pods import PodPhase, PodStatus

    async def main() -> None:
        node = await Node(tmp_path, MACHINES[0], "best-effort", "container").start()
        try:
            w = node.workloads
            pod = (await w.admit_manifest(manifest("job"))).pod

            def killed(rec) -> None:
                raise OSError(5, "Input/output error (the daemon is killed here)")

            w.registry.store.put = killed  # type: ignore[method-assign]
            with pytest.raises(OSError):
                await w.pod_status_changed(pod.uid, PodStatus(phase=PodPhase.SUCCEEDED, reason="Completed"))
            assert pod.uid not in {a.pod_uid for a in node._engine.allocations()}, "the CPU release ran first"
            await node.restart()
            w = node.workloads
            rec = w.registry.record(pod.uid)
            assert not rec.status.phase.terminal and not rec.released, "the record was written after all"
            await w.pod_status_changed(pod.uid, PodStatus(phase=PodPhase.SUCCEEDED, reason="Completed"))
            rec = w.registry.record(pod.uid)
            assert rec.status.phase == PodPhase.SUCCEEDED and rec.released
            assert pod.uid not in {a.pod_uid for a in node._engine.allocations()}
            await node.restart()
            rec = node.workloads.registry.record(pod.uid)
            assert rec.status.phase == PodPhase.SUCCEEDED and rec.released
        finally:
            await node.stop()

    asyncio.run(main())
