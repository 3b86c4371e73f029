"""hwagent's NRI plugin: connect to the runtime's NRI socket, register, answer its calls, reconnect.

One session is one connection to the runtime's socket, multiplexed
(``agent.nri.mux``): the plugin serves NRI's Plugin service on connection 1 and
calls the runtime's Runtime service on connection 2, both over ``agent.nri.ttrpc``.
The runtime expects, in this order: the plugin's ``RegisterPlugin`` (name and
two-digit index), then its own ``Configure`` (the plugin answers with the event
mask it subscribes to), then ``Synchronize`` (every pod and container it has),
then the events. When the runtime stops it calls ``Shutdown`` or just closes the
socket; the plugin then tries again every ``reconnect_interval_s`` until the
runtime is back, so a restarted containerd finds it registered again.

The plugin records what the runtime tells it (``agent.nri.view``). Given a
``Placer`` (``agent.nri.placement``; the daemon component gives it the owners)
it answers CreateContainer with the owners' placement, reconciles at
Synchronize, releases at StopPodSandbox/RemovePodSandbox and pushes moved
placements to running containers with UpdateContainers (``_pusher``: after each
release, and every ``push_interval_s`` for pool re-sizes). Without one (``main``,
run on its own) it answers every call with no adjustment.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any


from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.eventlog import FIELDS_ATTR, get_logger
from agent.nri.config import NriConfig
from agent.nri.mux import PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN, Mux
from agent.nri.ttrpc import Client, ConnectionClosed, Handler, Server, TtrpcError, unary
from agent.nri.view import NodeView

if TYPE_CHECKING:
    from agent.nri.placement import Placer

__all__ = ["PLUGIN_SERVICE", "RUNTIME_SERVICE", "SUBSCRIBED", "NriPlugin", "PluginState",
           "event_mask", "events_of", "main"]

log = get_logger("hwagent.nri")

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
RUNTIME_SERVICE = "nri.pkg.api.v1alpha1.Runtime"

#: the events hwagent asks for: the pod lifecycle and every container event it will act on
SUBSCRIBED: tuple[int, ...] = (
    nri.RUN_POD_SANDBOX, nri.STOP_POD_SANDBOX, nri.REMOVE_POD_SANDBOX,
    nri.CREATE_CONTAINER, nri.START_CONTAINER, nri.UPDATE_CONTAINER,
    nri.STOP_CONTAINER, nri.REMOVE_CONTAINER,
)

#: an event callback: (event, fields), e.g. ("configured", {"runtime": "containerd", ...})
EventSink = Callable[[str, Mapping[str, Any]], None]


def event_mask(events: Iterable[int]) -> int:
    """NRI's EventMask: event e is bit e-1 (UNKNOWN, 0, has no bit)."""
    mask = 0
    for e in events:
        if not nri.UNKNOWN < e < nri.LAST:
            raise ValueError(f"not an NRI event: {e}")
        mask |= 1 << (e - 1)
    return mask


def events_of(mask: int) -> list[str]:
    """The event names a mask holds, in NRI's order."""
    return [nri.Event.Name(e) for e in range(nri.UNKNOWN + 1, nri.LAST) if mask & (1 << (e - 1))]


@dataclass
class PluginState:
    """What `hwagent status` will show of the NRI connection (a snapshot, updated in place)."""

    connected: bool = False
    registered: bool = False
    runtime: str = ""
    runtime_version: str = ""
    sessions: int = 0
    last_error: str = ""
    register_ms: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    synchronized: int = 0


class NriPlugin:
    """The plugin: ``run(stop)`` keeps a session with the runtime until ``stop`` is set."""

    #: seconds between looks for placements that moved (pool re-sizes, ramp-ups ended)
    push_interval_s: float = 1.0
    #: seconds between looks at every placed container, not only those the CPU policy says
    #: moved (O(containers), off the runtime's calls): what an owner moved without saying
    full_check_s: float = 60.0

    def __init__(self, cfg: NriConfig, on_event: EventSink | None = None, placer: Placer | None = None) -> None:
        cfg.validate()
        self.cfg = cfg
        self.placer = placer
        self._kick = asyncio.Event()
        self._repair_due = False
        #: Synchronize done in this session (the pusher waits for it)
        self._synced = False
        self.view = NodeView()
        self.state = PluginState()
        self._on_event = on_event
        self._client: Client | None = None
        self._shutdown = asyncio.Event()
        self._sync_parts: list[nri.SynchronizeRequest] = []
        if placer is not None:
            placer.on_undone = self._undone

    def _undone(self) -> None:
        """A placement the runtime was answered with was undone (its record failed): the pusher
        places the container again and updates it, outside the runtime's calls."""
        self._repair_due = True
        self._kick.set()

    # -- the runtime's calls (Plugin service) ---------------------------------

    def services(self) -> dict[str, dict[str, Handler]]:
        return {PLUGIN_SERVICE: {
            "Configure": unary(nri.ConfigureRequest, self.configure),
            "Synchronize": unary(nri.SynchronizeRequest, self.synchronize),
            "Shutdown": unary(nri.Empty, self.shutdown),
            "CreateContainer": unary(nri.CreateContainerRequest, self.create_container),
            "UpdateContainer": unary(nri.UpdateContainerRequest, self.update_container),
            "StopContainer": unary(nri.StopContainerRequest, self.stop_container),
            "StateChange": unary(nri.StateChangeEvent, self.state_change),
        }}

    async def configure(self, req: nri.ConfigureRequest) -> nri.ConfigureResponse:
        self._count("Configure")
        self.state.runtime, self.state.runtime_version = req.runtime_name, req.runtime_version
        self._sync_parts.clear()
        mask = event_mask(SUBSCRIBED)
        log.info("nri configured", runtime=req.runtime_name, version=req.runtime_version,
               events=events_of(mask), request_timeout_ms=req.request_timeout)
        return nri.ConfigureResponse(events=mask)

    async def synchronize(self, req: nri.SynchronizeRequest) -> nri.SynchronizeResponse:
        """Record every pod and container. A runtime that splits a large list sends ``more`` until
        the last part; the parts are collected and applied together, as one list."""
        self._count("Synchronize")
        self._sync_parts.append(req)
        if req.more:
            return nri.SynchronizeResponse(more=True)
        parts, self._sync_parts = self._sync_parts, []
        pods, containers = [p for r in parts for p in r.pods], [c for r in parts for c in r.containers]
        self.view.synchronize(pods, containers)
        updates: list[nri.ContainerUpdate] = []
        released: list[str] = []
        decisions: list[Any] = []
        if self.placer is not None:
            updates, released, decisions = await self.placer.synchronize(pods, containers)
            for d in decisions:
                self._record(d)
        self.state.synchronized += 1
        self._synced = True
        log.info("nri synchronized", pods=len(self.view.pods), containers=len(self.view.containers),
                 parts=len(parts), released=len(released), placed=sum(d.outcome == "adjusted" for d in decisions),
                 refused=sum(d.outcome == "refused" for d in decisions), updates=len(updates))
        return nri.SynchronizeResponse(update=updates)

    async def shutdown(self, req: nri.Empty) -> nri.Empty:
        self._count("Shutdown")
        log.info("nri shutdown requested")
        self._shutdown.set()
        return nri.Empty()

    async def create_container(self, req: nri.CreateContainerRequest) -> nri.CreateContainerResponse:
        self._count("CreateContainer")
        self.view.container_event(nri.CREATE_CONTAINER, req.pod, req.container)
        if self.placer is None:
            log.info("nri create container", pod=self._pod_name(req.pod), container=req.container.name,
                     id=req.container.id, decision="no adjustment (no placer)")
            return nri.CreateContainerResponse()
        from agent.nri.metrics import DECISION_SECONDS
        from agent.nri.placement import adjustment

        started = time.perf_counter()
        # answered from the owners' memory; their records reach the disk behind the answer (Placer.answer)
        deciding = asyncio.ensure_future(self.placer.answer(req.pod, req.container))
        try:
            d = await asyncio.wait_for(asyncio.shield(deciding), self.cfg.answer_within_s)
        except TimeoutError:
            # never keep the node waiting: run it unadjusted now, push the placement when it is decided
            deciding.add_done_callback(functools.partial(self._decided_late, container_id=req.container.id))
            DECISION_SECONDS.observe(time.perf_counter() - started)
            log.warning("nri create container late", pod=self._pod_name(req.pod), container=req.container.name,
                        id=req.container.id, after_s=self.cfg.answer_within_s,
                        note="answered with no adjustment; the placement is pushed once decided")
            return nri.CreateContainerResponse()
        adjust = adjustment(d, self.placer.cgroup_v2)
        # a dedicated container shrinks the shared pool: the running shared containers move with it
        updates = self.placer.pending_updates(exclude=req.container.id)
        DECISION_SECONDS.observe(time.perf_counter() - started)
        self._record(d)
        _log_decision("create", req.container.id, d, len(updates))
        return nri.CreateContainerResponse(adjust=adjust, update=updates)

    async def update_container(self, req: nri.UpdateContainerRequest) -> nri.UpdateContainerResponse:
        self._count("UpdateContainer")
        self.view.container_event(nri.UPDATE_CONTAINER, req.pod, req.container)
        log.info("nri update container", pod=self._pod_name(req.pod), container=req.container.name)
        return nri.UpdateContainerResponse()

    async def stop_container(self, req: nri.StopContainerRequest) -> nri.StopContainerResponse:
        self._count("StopContainer")
        self.view.container_event(nri.STOP_CONTAINER, req.pod, req.container)
        if self.placer is not None:
            # nothing runs to move any more (its pod keeps the placement until the pod goes)
            self.placer.forget_container(req.container.id)
        log.info("nri stop container", pod=self._pod_name(req.pod), container=req.container.name)
        return nri.StopContainerResponse()

    async def state_change(self, req: nri.StateChangeEvent) -> nri.Empty:
        self._count("StateChange")
        pod = self._pod_name(req.pod)
        if req.event in (nri.RUN_POD_SANDBOX, nri.STOP_POD_SANDBOX, nri.REMOVE_POD_SANDBOX):
            self.view.pod_event(req.event, req.pod)
            if self.placer is not None and req.event != nri.RUN_POD_SANDBOX and \
                    await self.placer.release_pod(req.pod.uid):
                log.info("nri pod released", pod=pod, uid=req.pod.uid)
                self._repair_due = True  # what was refused may fit now
                self._kick.set()  # not from inside the runtime's call: the pusher sends the updates
        elif req.HasField("container"):
            self.view.container_event(req.event, req.pod if req.HasField("pod") else None, req.container)
            if self.placer is not None and req.event == nri.REMOVE_CONTAINER:
                self.placer.forget_container(req.container.id)
        log.info("nri state change", runtime_event=nri.Event.Name(req.event) if req.event in nri.Event.values() else req.event,
               pod=pod, container=req.container.name)
        return nri.Empty()

    # -- the plugin's calls (Runtime service) ----------------------------------

    async def update_containers(self, updates: Sequence[nri.ContainerUpdate],
                                evictions: Sequence[nri.ContainerEviction] = ()) -> list[nri.ContainerUpdate]:
        """Ask the runtime to change running containers; returns the updates it could not apply."""
        if self._client is None or not self.state.registered:
            raise ConnectionClosed("not registered with an NRI runtime")
        req = nri.UpdateContainersRequest(update=updates, evict=evictions)
        resp = nri.UpdateContainersResponse()
        resp.ParseFromString(await self._client.call(RUNTIME_SERVICE, "UpdateContainers",
                                                     req.SerializeToString(), timeout=self.cfg.register_timeout_s))
        return list(resp.failed)

    # -- connection ------------------------------------------------------------

    async def session(self, stop: asyncio.Event | None = None) -> None:
        """One connection: register, then serve until the runtime goes away, asks to shut down, or ``stop``."""
        reader, writer = await asyncio.open_unix_connection(self.cfg.socket_path)
        trunk = Mux(reader, writer)
        served, calls = trunk.open(PLUGIN_SERVICE_CONN), trunk.open(RUNTIME_SERVICE_CONN)
        self._shutdown = asyncio.Event()
        tasks = [asyncio.create_task(trunk.run(), name="nri-mux"),
                 asyncio.create_task(Server(self.services()).serve(served.reader, served), name="nri-serve")]
        client = self._client = Client(calls.reader, calls)
        client.start()
        self.state.sessions += 1
        self.state.connected = True
        self._synced = False
        try:
            started = time.monotonic()
            reg = nri.RegisterPluginRequest(plugin_name=self.cfg.plugin_name, plugin_idx=self.cfg.plugin_index)
            await client.call(RUNTIME_SERVICE, "RegisterPlugin", reg.SerializeToString(),
                              timeout=self.cfg.register_timeout_s)
            self.state.register_ms = (time.monotonic() - started) * 1000
            self.state.registered = True
            self.state.last_error = ""
            log.info("nri registered", name=f"{self.cfg.plugin_index}-{self.cfg.plugin_name}",
                   socket=self.cfg.socket_path, round_trip_ms=round(self.state.register_ms, 3))
            if self.placer is not None:
                tasks.append(asyncio.create_task(self._pusher(), name="nri-push"))
            waits = [tasks[0], asyncio.create_task(self._shutdown.wait())]
            if stop is not None:
                waits.append(asyncio.create_task(stop.wait()))
            done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for t in pending:
                if t is not tasks[0]:
                    t.cancel()
            if tasks[0] in done and tasks[0].exception() is not None:
                raise tasks[0].exception()  # type: ignore[misc]
        finally:
            self.state.connected = self.state.registered = False
            self._client = None
            trunk.close()
            await client.close()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            log.info("nri disconnected")

    async def run(self, stop: asyncio.Event) -> None:
        """Sessions, one after another, until ``stop``: a runtime restart is a reconnect, not an exit.
        The caller's event sink, if any, sees each event the plugin logs (its own log lines, as
        fields), so what it is told and what the log says cannot drift apart."""
        sink = _EventHandler(self._on_event) if self._on_event is not None else None
        level = log.logger.level
        if sink is not None:
            log.logger.addHandler(sink)
            if log.logger.getEffectiveLevel() > logging.INFO:  # the sink sees info events whatever the log shows
                log.logger.setLevel(logging.INFO)
        try:
            await self._sessions(stop)
        finally:
            if sink is not None:
                log.logger.removeHandler(sink)
                log.logger.setLevel(level)

    async def _sessions(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.session(stop)
            except (OSError, ConnectionClosed, TtrpcError) as exc:
                error = str(exc) or type(exc).__name__
                if error != self.state.last_error:  # once per cause, not once per second
                    log.info("nri connection failed", socket=self.cfg.socket_path, error=error)
                self.state.last_error = error
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.cfg.reconnect_interval_s)

    async def _pusher(self) -> None:
        """Moved placements to running containers, outside the runtime's own calls (a plugin
        that calls UpdateContainers while the runtime waits for its answer would wait on
        itself): after a release (and then repair what runs unadjusted), and every
        ``push_interval_s`` (pool re-sizes by the advisor, ramp-ups ended)."""
        from agent.nri.metrics import UPDATES
        from agent.nri.placement import update_for

        assert self.placer is not None
        placer = self.placer
        last_full = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self.push_interval_s)
            self._kick.clear()
            if not self._synced or not self.state.registered:
                continue
            repaired: list[nri.ContainerUpdate] = []
            if self._repair_due:
                self._repair_due = False
                for cid, d in await placer.repair():
                    self._record(d)
                    _log_decision("repaired", cid, d)
                    repaired.append(update_for(cid, d, placer.cgroup_v2))
                placer.counters.updates += len(repaired)
            full = time.monotonic() - last_full >= self.full_check_s
            if full:
                last_full = time.monotonic()
            updates = repaired + placer.pending_updates(full=full)
            if not updates:
                continue
            try:
                failed = await self.update_containers(updates)
            except (ConnectionClosed, TtrpcError, OSError) as exc:
                UPDATES.labels("error").inc(len(updates))
                log.warning("nri update containers failed", error=str(exc), updates=len(updates))
                continue
            UPDATES.labels("failed").inc(len(failed))
            UPDATES.labels("applied").inc(len(updates) - len(failed))
            log.info("nri containers updated", updates=len(updates), failed=len(failed),
                     containers=[u.container_id for u in updates],
                     cpus=sorted({u.linux.resources.cpu.cpus for u in updates}))

    def _decided_late(self, task: asyncio.Future[Any], *, container_id: str) -> None:
        """A decision that missed the answer: what it placed goes out as an update (the pusher
        sends every placed container whose runtime was told something else)."""
        if task.cancelled() or task.exception() is not None:
            log.warning("nri late decision failed", id=container_id,
                        error=str(task.exception()) if not task.cancelled() else "cancelled")
            return
        d = task.result()
        self._record(d)
        _log_decision("late", container_id, d)
        if d.applied and self.placer is not None and container_id in self.placer.told:
            self.placer.untold(container_id)  # the runtime applied nothing of it
            self._kick.set()

    def _record(self, d: Any) -> None:
        from agent.nri.metrics import ADJUSTMENTS

        ADJUSTMENTS.labels(d.outcome, d.level or "none").inc()
        if d.outcome == "refused":
            _log_decision("refused", "", d)

    def snapshot(self) -> dict[str, Any]:
        """What `hwagent status` shows (agent.contracts.nri.NriPluginView.state)."""
        st, p = self.state, self.placer
        c = p.counters if p is not None else None
        return {
            "socket": self.cfg.socket_path, "name": f"{self.cfg.plugin_index}-{self.cfg.plugin_name}",
            "connected": st.connected, "registered": st.registered, "runtime": st.runtime,
            "runtime_version": st.runtime_version, "sessions": st.sessions, "last_error": st.last_error,
            "synchronized": st.synchronized, "pods": len(self.view.pods), "containers": len(self.view.containers),
            "adjusted": c.adjusted if c else 0, "failed": c.failed if c else 0,
            "unadjusted": len(p.unadjusted) if p else 0, "updates": c.updates if c else 0,
            "released": c.released if c else 0,
        }

    # -- helpers ---------------------------------------------------------------

    def _pod_name(self, pod: nri.PodSandbox) -> str:
        """"namespace/name" from the message itself, else from what the view knows, else the id."""
        return f"{pod.namespace}/{pod.name}" if pod.name else self.view.describe(pod.id)

    def _count(self, call: str) -> None:
        self.state.calls[call] += 1



def _log_decision(kind: str, cid: str, d: Any, updates: int = 0) -> None:
    """One decision's log line (``kind``: create, repaired, late, refused), every field named."""
    cpus = "" if d.cpus is None else str(d.cpus)
    mems = "" if d.mems is None else str(d.mems)
    wall, cpu = round(d.decide_ms, 3), round(d.decide_cpu_ms, 3)
    if kind == "create":
        log.info("nri create container", id=cid, updates=updates, pod=d.pod, container=d.container,
                 decision=d.outcome, reason=d.reason, qos=d.level, kube_qos=d.kube_qos, cpus=cpus, mems=mems,
                 decide_ms=wall, decide_cpu_ms=cpu)
    elif kind == "repaired":
        log.info("nri container repaired", id=cid, pod=d.pod, container=d.container, decision=d.outcome,
                 qos=d.level, cpus=cpus, mems=mems, decide_ms=wall)
    elif kind == "late":
        log.info("nri create container decided late", id=cid, pod=d.pod, container=d.container,
                 decision=d.outcome, qos=d.level, cpus=cpus, mems=mems, decide_ms=wall)
    else:
        log.warning("nri adjustment refused", pod=d.pod, container=d.container, reason=d.reason, qos=d.level,
                    kube_qos=d.kube_qos, note="the container runs unadjusted until the owners can place it")


class _EventHandler(logging.Handler):
    """The plugin's log events, handed to an :data:`EventSink` as (event without "nri ", fields)."""

    def __init__(self, sink: EventSink) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        event = str(record.msg)
        self.sink(event.removeprefix("nri "), dict(getattr(record, FIELDS_ATTR, {})))


def _print_event(event: str, fields: Mapping[str, Any]) -> None:
    print(json.dumps({"t": round(time.time(), 6), "event": event, **fields}, default=str), flush=True)


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    d = NriConfig()
    p = argparse.ArgumentParser(prog="python -m agent.nri.plugin",
                                description="hwagent's NRI plugin on its own (one JSON line per event on stdout)")
    p.add_argument("--socket", default=d.socket_path, help=f"the runtime's NRI socket (default {d.socket_path})")
    p.add_argument("--name", default=d.plugin_name, help=f"plugin name (default {d.plugin_name})")
    p.add_argument("--index", default=d.plugin_index, help=f"two-digit plugin index (default {d.plugin_index})")
    p.add_argument("--reconnect-interval", type=float, default=d.reconnect_interval_s, metavar="S")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the plugin alone until SIGTERM/SIGINT (the integration test's and an operator's way to try it)."""
    a = _args(argv)
    try:
        cfg = NriConfig(enabled=True, socket_path=a.socket, plugin_name=a.name, plugin_index=a.index,
                        reconnect_interval_s=a.reconnect_interval)
        cfg.validate()
    except ValueError as exc:
        print(f"hwagent nri: {exc}", file=sys.stderr)
        return 2

    async def go() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await NriPlugin(cfg, on_event=_print_event).run(stop)

    asyncio.run(go())
    return 0


if __name__ == "__main__":
    sys.exit(main())
