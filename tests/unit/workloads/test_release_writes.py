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
