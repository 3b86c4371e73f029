"""A CreateContainer is answered with its placement before the owners' journal has it on
disk: the runtime's own state is what a restarted hwagent reconciles with (Synchronize), so
the answer need not wait for an fdatasync, which on a loaded disk is most of the round trip
(issue 34: p99 within 2x the floor of the protocol). A record that cannot be made durable
undoes the placement in the owner; the container is then counted, run as unadjusted and
repaired by UpdateContainers. Over a real socket with the runtime stand-in of
test_plugin_budget and the real CPU policy and journal, whose disk is made slow or failing."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.cpuset import CPUSet
from agent.nri.config import NriConfig
from agent.nri.placement import Placer
from agent.nri.plugin import NriPlugin
from tests.unit.nri.test_placement import TWO_NODES, nri_container
from tests.unit.nri.test_plugin import call
from tests.unit.nri.test_plugin_budget import Runtime
from tests.unit.workloads.admission_node import Node


async def _session(d: str, disk: Any, body: Any) -> None:
    node = await Node(Path(d) / "node", TWO_NODES, "single-numa-node", "container",
                      "exclusive-cores").start()  # type: ignore[arg-type]
    journal = node._engine.store.journal
    write = journal._append_sync
    journal._append_sync = lambda data: disk(write, data)  # type: ignore[method-assign]
    path = str(Path(d) / "nri.sock")
    runtime = Runtime(path)
    await runtime.start()
    placer = Placer(node.workloads.topology_manager, cpu_policy=node._engine)
    plugin = NriPlugin(NriConfig(enabled=True, socket_path=path, reconnect_interval_s=0.05,
                                 answer_within_s=0.3), placer=placer)
    plugin.push_interval_s = 0.05
    stop = asyncio.Event()
    task = asyncio.create_task(plugin.run(stop))
    try:
        client = await asyncio.wait_for(runtime.client, 5)
        await call(client, "Configure", nri.ConfigureRequest(runtime_name="fake"), nri.ConfigureResponse)
        await call(client, "Synchronize", nri.SynchronizeRequest(), nri.SynchronizeResponse)
        await body(node, placer, client, runtime)
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
        await runtime.stop()
        journal._append_sync = write  # type: ignore[method-assign]
        await node.stop()


def test_the_answer_carries_the_placement_before_a_slow_disk_has_it() -> None:
    def slow(write: Any, data: bytes) -> None:
        time.sleep(1.0)  # an fdatasync on a loaded disk (on the journal's own thread)
        write(data)

    async def body(node: Node, placer: Placer, client: Any, runtime: Runtime) -> None:
        journal = node._engine.store.journal
        pod, ctr = nri_container("g", "/kubepods/podg", shares=2048, quota=200_000)
        began = time.monotonic()
        resp = await call(client, "CreateContainer", nri.CreateContainerRequest(pod=pod, container=ctr),
                          nri.CreateContainerResponse)
        answered = time.monotonic() - began
        assert resp.HasField("adjust"), "answered without the placement"
        held = node._engine.placement("g", "main")
        assert held is not None and CPUSet.parse(resp.adjust.linux.resources.cpu.cpus) == held.cpus
        assert answered < 0.3, answered
        assert journal.durable_seq < journal.seq  # the record was still on its way
        await journal.barrier()
        assert node._engine.placement("g", "main") == held  # and then it held

    with tempfile.TemporaryDirectory(prefix="nri", dir="/tmp") as d:
        asyncio.run(asyncio.wait_for(_session(d, slow, body), 30))


def test_a_placement_whose_record_fails_runs_unadjusted_and_is_repaired() -> None:
    failures = {"left": 1}

    def failing_once(write: Any, data: bytes) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise OSError(28, "No space left on device")
        write(data)

    async def body(node: Node, placer: Placer, client: Any, runtime: Runtime) -> None:
        pod, ctr = nri_container("g", "/kubepods/podg", shares=2048, quota=200_000)
        resp = await call(client, "CreateContainer", nri.CreateContainerRequest(pod=pod, container=ctr),
                          nri.CreateContainerResponse)
        assert resp.HasField("adjust")  # the runtime applied it; the record then failed
        # the owner undid the placement; the pusher places it again and tells the runtime
        req = await asyncio.wait_for(runtime.updates.get(), 5)
        [u] = req.update
        assert u.container_id == ctr.id
        held = node._engine.placement("g", "main")
        assert held is not None and CPUSet.parse(u.linux.resources.cpu.cpus) == held.cpus
        assert placer.counters.failed == 1 and not placer.unadjusted
        await node._engine.wait_durable()

    with tempfile.TemporaryDirectory(prefix="nri", dir="/tmp") as d:
        asyncio.run(asyncio.wait_for(_session(d, failing_once, body), 30))


if __name__ == "__main__":
    pytest.main([__file__])
