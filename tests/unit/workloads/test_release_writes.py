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
