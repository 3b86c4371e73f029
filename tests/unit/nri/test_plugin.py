"""agent.nri.plugin against a runtime stand-in on a real unix socket.

The stand-in plays containerd's side as NRI's adaptation does (serves Runtime on
connection 2, calls Plugin on connection 1) with hwagent's own ttrpc and mux;
tests/integration/nri/ runs the same plugin against the real containerd.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.nri import mux, ttrpc
from agent.nri.config import NriConfig
from agent.nri.plugin import PLUGIN_SERVICE, RUNTIME_SERVICE, SUBSCRIBED, NriPlugin, event_mask, events_of


def run(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(), 20))


class FakeRuntime:
    """Accepts plugin connections; records registrations; lets the test call the plugin."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.registered: asyncio.Queue[tuple[nri.RegisterPluginRequest, ttrpc.Client]] = asyncio.Queue()
        self.server: asyncio.AbstractServer | None = None
        self.tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        self.server = await asyncio.start_unix_server(self._accept, path=self.path)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        trunk = mux.Mux(reader, writer)
        served, calls = trunk.open(mux.RUNTIME_SERVICE_CONN), trunk.open(mux.PLUGIN_SERVICE_CONN)
        client = ttrpc.Client(calls.reader, calls)
        client.start()

        async def register(req: nri.RegisterPluginRequest) -> nri.Empty:
            await self.registered.put((req, client))
            return nri.Empty()

        srv = ttrpc.Server({RUNTIME_SERVICE: {"RegisterPlugin": ttrpc.unary(nri.RegisterPluginRequest, register)}})
        self.tasks += [asyncio.create_task(trunk.run()), asyncio.create_task(srv.serve(served.reader, served))]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def call(client: ttrpc.Client, method: str, req: Any, resp_type: Any) -> Any:
    out = resp_type()
    out.ParseFromString(await client.call(PLUGIN_SERVICE, method, req.SerializeToString(), timeout=5))
    return out


def _pod(i: int) -> nri.PodSandbox:
    return nri.PodSandbox(id=f"pod{i}", name=f"web-{i}", namespace="default", uid=f"uid-{i}")


def _ctr(i: int, pod: int) -> nri.Container:
    return nri.Container(id=f"ctr{i}", pod_sandbox_id=f"pod{pod}", name=f"c{i}", state=nri.CONTAINER_RUNNING)


def test_event_mask_is_nri_bit_numbering() -> None:
    assert event_mask([nri.RUN_POD_SANDBOX]) == 0x1
    assert event_mask([nri.CREATE_CONTAINER]) == 0x8
    every = range(nri.RUN_POD_SANDBOX, nri.LAST)
    assert event_mask(every) == 0x7FF  # NRI's ValidEvents
    assert events_of(event_mask(SUBSCRIBED)) == [nri.Event.Name(e) for e in SUBSCRIBED]
    for bad in (nri.UNKNOWN, nri.LAST):
        with pytest.raises(ValueError):
            event_mask([bad])


@pytest.mark.parametrize("change", [{"plugin_index": "9"}, {"plugin_index": "ab"}, {"plugin_name": ""},
                                    {"plugin_name": "a/b"}, {"socket_path": "nri.sock"},
                                    {"reconnect_interval_s": 0}])
def test_bad_config_is_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        NriPlugin(NriConfig(**change))


def test_registers_configures_synchronizes_answers_and_reconnects_after_shutdown() -> None:
    async def go() -> None:
        with tempfile.TemporaryDirectory(prefix="nri", dir="/tmp") as d:
            path = str(Path(d) / "nri.sock")
            runtime = FakeRuntime(path)
            await runtime.start()
            events: list[str] = []
            plugin = NriPlugin(NriConfig(enabled=True, socket_path=path, plugin_name="hwagent", plugin_index="90",
                                         reconnect_interval_s=0.05),
                               on_event=lambda e, f: events.append(e))
            stop = asyncio.Event()
            task = asyncio.create_task(plugin.run(stop))

            reg, client = await asyncio.wait_for(runtime.registered.get(), 5)
            assert (reg.plugin_name, reg.plugin_idx) == ("hwagent", "90")
            cfg = await call(client, "Configure", nri.ConfigureRequest(runtime_name="fake", runtime_version="0"),
                             nri.ConfigureResponse)
            assert cfg.events == event_mask(SUBSCRIBED)
            assert plugin.state.registered and plugin.state.runtime == "fake"

            # a synchronize split in two parts: the first is acknowledged with more, the whole applied at the end
            part1 = nri.SynchronizeRequest(pods=[_pod(1)], containers=[_ctr(1, 1)], more=True)
            part2 = nri.SynchronizeRequest(pods=[_pod(2)], containers=[_ctr(2, 2), _ctr(3, 2)])
            r1 = await call(client, "Synchronize", part1, nri.SynchronizeResponse)
            assert r1.more and not r1.update and plugin.view.pods == {}
            r2 = await call(client, "Synchronize", part2, nri.SynchronizeResponse)
            assert not r2.more and not r2.update
            assert sorted(plugin.view.pods) == ["pod1", "pod2"]
            assert sorted(plugin.view.containers) == ["ctr1", "ctr2", "ctr3"]

            created = await call(client, "CreateContainer",
                                 nri.CreateContainerRequest(pod=_pod(2), container=_ctr(4, 2)),
                                 nri.CreateContainerResponse)
            assert not created.HasField("adjust") and not created.update and not created.evict
            assert plugin.view.containers["ctr4"].state == "created"

            await call(client, "StateChange", nri.StateChangeEvent(event=nri.REMOVE_POD_SANDBOX, pod=_pod(2)),
                       nri.Empty)
            assert sorted(plugin.view.pods) == ["pod1"] and sorted(plugin.view.containers) == ["ctr1"]

            # an unknown method is UNIMPLEMENTED, not a dead connection
            with pytest.raises(ttrpc.TtrpcError) as err:
                await client.call(PLUGIN_SERVICE, "NoSuchCall", b"", timeout=5)
            assert err.value.code == ttrpc.Code.UNIMPLEMENTED

            # the runtime says shut down: the plugin lets go of the connection and registers again
            await call(client, "Shutdown", nri.Empty(), nri.Empty)
            reg2, client2 = await asyncio.wait_for(runtime.registered.get(), 5)
            assert client2 is not client and reg2.plugin_idx == "90"
            assert plugin.state.sessions == 2

            stop.set()
            await asyncio.wait_for(task, 5)
            await runtime.stop()
            assert events[:4] == ["registered", "configured", "synchronized", "create container"]
            assert "shutdown requested" in events and events[-1] == "disconnected"

    run(go)


def test_keeps_trying_while_the_runtime_is_absent_and_reports_once() -> None:
    async def go() -> None:
        with tempfile.TemporaryDirectory(prefix="nri", dir="/tmp") as d:
            path = str(Path(d) / "nri.sock")
            failures: list[dict[str, Any]] = []
            plugin = NriPlugin(NriConfig(socket_path=path, reconnect_interval_s=0.02),
                               on_event=lambda e, f: failures.append(dict(f)) if e == "connection failed" else None)
            stop = asyncio.Event()
            task = asyncio.create_task(plugin.run(stop))
            await asyncio.sleep(0.3)
            assert len(failures) == 1 and "No such file" in failures[0]["error"]
            runtime = FakeRuntime(path)  # the runtime appears later
            await runtime.start()
            reg, _ = await asyncio.wait_for(runtime.registered.get(), 5)
            assert reg.plugin_name == "hwagent"
            stop.set()
            await asyncio.wait_for(task, 5)
            await runtime.stop()

    run(go)
