"""The thinnest Python NRI plugin over hwagent's own ttrpc and multiplexer: the Python floor.

It does what any NRI plugin must and nothing else: connect to the runtime's
socket, register, subscribe to the events hwagent's plugin subscribes to, and
answer every CreateContainer with one fixed cpuset adjustment (``--cpus``,
``--mems``); every other call gets an empty answer, nothing is recorded or
decided. bench/nri.py runs it beside hwagent's plugin and the Go floor
(tests/peer/nri/nripeer, NRI's own stub), so the cost of the protocol in
Python (agent.nri.ttrpc, agent.nri.mux, protobuf) is told apart from the cost
of hwagent's decisions. It exits when the runtime closes the connection.

Run: .venv/bin/python bench/nri_floor/floor.py --socket S [--cpus 0-1] [--mems 0]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from agent.api.nri.v1alpha1 import api_pb2 as nri  # noqa: E402
from agent.nri.mux import PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN, Mux  # noqa: E402
from agent.nri.plugin import PLUGIN_SERVICE, RUNTIME_SERVICE, SUBSCRIBED, event_mask  # noqa: E402
from agent.nri.ttrpc import Client, Handler, Server, unary  # noqa: E402


def adjustment(cpus: str, mems: str) -> nri.ContainerAdjustment:
    """The one answer to every CreateContainer (empty when neither is given)."""
    adj = nri.ContainerAdjustment()
    if cpus:
        adj.linux.resources.cpu.cpus = cpus
    if mems:
        adj.linux.resources.cpu.mems = mems
    return adj


def services(answer: nri.CreateContainerResponse) -> dict[str, dict[str, Handler]]:
    """The Plugin service: fixed answers, no state."""

    def const(msg: object) -> Callable[[object], Awaitable[object]]:
        async def handle(_req: object) -> object:
            return msg
        return handle

    mask = event_mask(SUBSCRIBED)
    return {PLUGIN_SERVICE: {
        "Configure": unary(nri.ConfigureRequest, const(nri.ConfigureResponse(events=mask))),  # type: ignore[arg-type]
        "Synchronize": unary(nri.SynchronizeRequest, const(nri.SynchronizeResponse())),  # type: ignore[arg-type]
        "Shutdown": unary(nri.Empty, const(nri.Empty())),  # type: ignore[arg-type]
        "CreateContainer": unary(nri.CreateContainerRequest, const(answer)),  # type: ignore[arg-type]
        "UpdateContainer": unary(nri.UpdateContainerRequest, const(nri.UpdateContainerResponse())),  # type: ignore[arg-type]
        "StopContainer": unary(nri.StopContainerRequest, const(nri.StopContainerResponse())),  # type: ignore[arg-type]
        "StateChange": unary(nri.StateChangeEvent, const(nri.Empty())),  # type: ignore[arg-type]
    }}


async def run(socket: str, name: str, index: str, answer: nri.CreateContainerResponse) -> None:
    reader, writer = await asyncio.open_unix_connection(socket)
    trunk = Mux(reader, writer)
    served, calls = trunk.open(PLUGIN_SERVICE_CONN), trunk.open(RUNTIME_SERVICE_CONN)
    serving = asyncio.create_task(Server(services(answer)).serve(served.reader, served))
    client = Client(calls.reader, calls)
    client.start()
    reading = asyncio.create_task(trunk.run())
    reg = nri.RegisterPluginRequest(plugin_name=name, plugin_idx=index)
    await client.call(RUNTIME_SERVICE, "RegisterPlugin", reg.SerializeToString(), timeout=5.0)
    await reading  # until the runtime closes the connection
    serving.cancel()
    await client.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--socket", required=True)
    p.add_argument("--name", default="pyfloor")
    p.add_argument("--index", default="90")
    p.add_argument("--cpus", default="")
    p.add_argument("--mems", default="")
    a = p.parse_args()
    answer = nri.CreateContainerResponse(adjust=adjustment(a.cpus, a.mems))
    asyncio.run(run(a.socket, a.name, a.index, answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
