"""CreateContainer never keeps the runtime waiting: a decision slower than ``answer_within_s``
is answered with no adjustment, and its placement reaches the running container by
UpdateContainers once decided. Over a real socket with a runtime stand-in (test_plugin's)
that also serves UpdateContainers, and a real Placer whose CPU policy is slow to persist."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.contracts.cpu import AllocateResult, Request
from agent.cpuset import CPUSet
from agent.nri import mux, ttrpc
from agent.nri.config import NriConfig
from agent.nri.placement import Placer
from agent.nri.plugin import RUNTIME_SERVICE, NriPlugin
from tests.unit.nri.test_placement import TWO_NODES, nri_container
from tests.unit.nri.test_plugin import call
from tests.unit.workloads.admission_node import Node


class SlowPolicy:
    """The CPU policy, with a commit that takes ``delay`` seconds (a journal's fsync under load)."""

    def __init__(self, policy: Any, delay: float) -> None:
        self._p, self.delay = policy, delay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._p, name)

    async def allocate(self, req: Request) -> AllocateResult:
        await asyncio.sleep(self.delay)
        return await self._p.allocate(req)


class Runtime:
    """Accepts one plugin, records its registration and the UpdateContainers it sends."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.client: asyncio.Future[ttrpc.Client] = asyncio.get_running_loop().create_future()
        self.updates: asyncio.Queue[nri.UpdateContainersRequest] = asyncio.Queue()
        self.tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        self.server = await asyncio.start_unix_server(self._accept, path=self.path)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        trunk = mux.Mux(reader, writer)
        served, calls = trunk.open(mux.RUNTIME_SERVICE_CONN), trunk.open(mux.PLUGIN_SERVICE_CONN)
        client = ttrpc.Client(calls.reader, calls)
        client.start()

        async def register(req: nri.RegisterPluginRequest) -> nri.Empty:
            if not self.client.done():
                self.client.set_result(client)
            return nri.Empty()

        async def update(req: nri.UpdateContainersRequest) -> nri.UpdateContainersResponse:
            await self.updates.put(req)
            return nri.UpdateContainersResponse()

        srv = ttrpc.Server({RUNTIME_SERVICE: {"RegisterPlugin": ttrpc.unary(nri.RegisterPluginRequest, register),
                                              "UpdateContainers": ttrpc.unary(nri.UpdateContainersRequest, update)}})
        self.tasks += [asyncio.create_task(trunk.run()), asyncio.create_task(srv.serve(served.reader, served))]

    async def stop(self) -> None:
        self.server.close()
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def test_a_slow_decision_is_answered_unadjusted_in_time_and_pushed_when_decided() -> None:
    async def go() -> None:
        with tempfile.TemporaryDirectory(prefix="nri", dir="/tmp") as d:
            node = await Node(Path(d) / "node", TWO_NODES, "single-numa-node", "container",
                              "exclusive-cores").start()  # type: ignore[arg-type]
            path = str(Path(d) / "nri.sock")
            runtime = Runtime(path)
            await runtime.start()
            placer = Placer(node.workloads.topology_manager, cpu_policy=SlowPolicy(node._engine, 0.6))
            plugin = NriPlugin(NriConfig(enabled=True, socket_path=path, reconnect_interval_s=0.05,
                                         answer_within_s=0.2), placer=placer)
            plugin.push_interval_s = 0.05
            stop = asyncio.Event()
            task = asyncio.create_task(plugin.run(stop))
            try:
                client = await asyncio.wait_for(runtime.client, 5)
                await call(client, "Configure", nri.ConfigureRequest(runtime_name="fake"), nri.ConfigureResponse)
                await call(client, "Synchronize", nri.SynchronizeRequest(), nri.SynchronizeResponse)

                pod, ctr = nri_container("g", "/kubepods/podg", shares=2048, quota=200_000)
                began = time.monotonic()
                resp = await call(client, "CreateContainer", nri.CreateContainerRequest(pod=pod, container=ctr),
                                  nri.CreateContainerResponse)
                answered = time.monotonic() - began
                assert answered < 0.5, answered  # the budget, not the 0.6 s commit
                assert not resp.HasField("adjust")

                # once decided, the placement is pushed to the running container
                req = await asyncio.wait_for(runtime.updates.get(), 5)
                [u] = req.update
                assert u.container_id == ctr.id
                held = node._engine.placement("g", "main")
                assert held is not None and len(held.cpus) == 2
                assert CPUSet.parse(u.linux.resources.cpu.cpus) == held.cpus
                assert CPUSet.parse(u.linux.resources.cpu.mems) == held.mems
                assert placer.pending_updates() == []  # told once
            finally:
                stop.set()
                await asyncio.wait_for(task, 5)
                await runtime.stop()
                await node.stop()

    asyncio.run(asyncio.wait_for(go(), 30))


def test_a_released_pod_lets_the_refused_container_in_and_a_stopped_one_is_not_pushed() -> None:
    """StopPodSandbox releases; the pusher repairs the refused container with UpdateContainers (not
    from inside the runtime's call); a stopped container's moves are never pushed."""
    async def go() -> None:
        with tempfile.TemporaryDirectory(prefix="nri", dir="/tmp") as d:
            node = await Node(Path(d) / "node", TWO_NODES, "single-numa-node", "container",
                              "exclusive-cores").start()  # type: ignore[arg-type]
            path = str(Path(d) / "nri.sock")
            runtime = Runtime(path)
            await runtime.start()
            placer = Placer(node.workloads.topology_manager, cpu_policy=node._engine)
            plugin = NriPlugin(NriConfig(enabled=True, socket_path=path, reconnect_interval_s=0.05), placer=placer)
            plugin.push_interval_s = 0.05
            stop = asyncio.Event()
            task = asyncio.create_task(plugin.run(stop))
            try:
                client = await asyncio.wait_for(runtime.client, 5)
                await call(client, "Configure", nri.ConfigureRequest(runtime_name="fake"), nri.ConfigureResponse)
                await call(client, "Synchronize", nri.SynchronizeRequest(), nri.SynchronizeResponse)

                async def create(uid: str, shares: int, quota: int = 0, parent: str = "") -> Any:
                    pod, ctr = nri_container(uid, parent or f"/kubepods/pod{uid}", shares=shares, quota=quota)
                    r = await call(client, "CreateContainer", nri.CreateContainerRequest(pod=pod, container=ctr),
                                   nri.CreateContainerResponse)
                    return pod, ctr, r

                spod, sctr, _ = await create("s", 1024, parent="/kubepods/burstable/pods")
                await call(client, "StopContainer", nri.StopContainerRequest(pod=spod, container=sctr),
                           nri.StopContainerResponse)
                apod, _, a = await create("a", 3072, 300_000)
                _, _, b = await create("b", 4096, 400_000)
                _, lctr, late = await create("late", 3072, 300_000)
                assert a.HasField("adjust") and b.HasField("adjust") and not late.HasField("adjust")
                assert not any(u.container_id == sctr.id for r in (a, b) for u in r.update)  # stopped: not moved

                await call(client, "StateChange", nri.StateChangeEvent(event=nri.STOP_POD_SANDBOX, pod=apod),
                           nri.Empty)
                req = await asyncio.wait_for(runtime.updates.get(), 5)
                assert [u.container_id for u in req.update] == [lctr.id]
                held = node._engine.placement("late", "main")
                assert held is not None and CPUSet.parse(req.update[0].linux.resources.cpu.cpus) == held.cpus
                await asyncio.sleep(0.3)
                assert runtime.updates.empty()  # nothing else, the stopped container least of all
            finally:
                stop.set()
                await asyncio.wait_for(task, 5)
                await runtime.stop()
                await node.stop()

    asyncio.run(asyncio.wait_for(go(), 30))
