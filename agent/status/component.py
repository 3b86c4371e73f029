"""``<root>/status.sock``: the hwagent.status.v1 service, answering from live state.

Started last, so every other component's handle is published: it looks them
all up in its start() (``CPU_POLICY``, ``DEVICE_MANAGER``, ``DEVICE_PLUGINS``,
``POD_DIRECTORY``, ``PRESSURE``, ``EVICTION_PLUGIN``, ``MEMORY_MANAGER``, ``DRA_KUBELET_PLUGIN``) and
publishes nothing.
Each request is answered on the loop from the handles (no copies kept), so what
`hwagent status` shows is what the daemon holds at that moment. Owner-only
socket, like every hwagent socket. The same answers are served as HTTP/JSON on
``<root>/status-http.sock`` (agent.status.httpapi, root only), which the CLI asks.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from agent.contracts import CPU_POLICY, DEVICE_MANAGER, DEVICE_PLUGINS, EVICTION_PLUGIN, MEMORY_MANAGER, POD_DIRECTORY
from agent.contracts.drakubelet import DRA_KUBELET_PLUGIN
from agent.contracts.nri import NRI_PLUGIN, NriPluginView
from agent.contracts import EVICTION_GATE, PRESSURE, WORKLOADS
from agent.contracts import DaemonContext
from agent.eventlog import get_logger
from agent.rootpaths import STATUS_SOCKET as SOCKET_NAME
from agent.rootpaths import status_socket
from agent.status.views import Handles

log = get_logger("hwagent.status")

__all__ = ["StatusComponent", "factory", "SOCKET_NAME", "status_socket"]

def _numa_cpus(topology: Any) -> dict[int, Any]:
    from agent.cpuset import CPUSet

    out: dict[int, CPUSet] = {}
    for c in topology.cpus:
        n = c.numa_node if c.numa_node is not None else 0
        out[n] = out.get(n, CPUSet()) | CPUSet([c.id])
    return out


class StatusComponent:
    name = "status"

    def __init__(self) -> None:
        self._server: Any = None
        self._ctx: DaemonContext | None = None
        self._handles = Handles()
        self.socket_path: Path | None = None
        self._t0 = time.monotonic()
        self._collector: Any = None
        self._http: Any = None
        self._nri: NriPluginView | None = None

    # -- the answers ----------------------------------------------------------------------
    def status(self) -> Any:
        from agent.api.status.v1 import api_pb2 as pb
        from agent.status.views import evictions_view, pods_view

        ctx = self._ctx
        assert ctx is not None
        s = self._handles
        resp = pb.GetStatusResponse(mode=ctx.mode, mode_reason=ctx.mode_reason, phase="running", pid=os.getpid(),
                                    uptime_seconds=round(time.monotonic() - self._t0, 3))
        health = ctx.component_health() if ctx.component_health else []
        for name, ok in health:
            resp.components.append(pb.ComponentStatus(name=name, healthy=ok, ready=ok, detail=self._detail(name)))
        engine = s.pressure
        if engine is not None:
            for probe, (mode, detail) in engine.status().items():
                resp.probes.append(pb.ProbeStatus(name=probe, mode=mode, detail=detail))
        manager = s.devices
        if manager is not None:
            cap, alloc, _ = manager.capacity()
            used: dict[str, set[str]] = {}
            for a in manager.allocations():
                used.setdefault(a.resource, set()).update(a.device_ids)
            for r in sorted(cap):
                resp.resources.append(pb.ResourceStatus(name=r, capacity=cap[r], allocatable=alloc.get(r, 0),
                                                        allocated=len(used.get(r, ())), source="host"))
        plugins = s.plugins
        if plugins is not None and manager is None:
            pods = s.pods
            for st in plugins.plugin_states():
                held = sum(1 for d in st.devices
                           if pods is not None and pods.current.holder_of(st.resource, d.id) is not None)
                resp.resources.append(pb.ResourceStatus(name=st.resource, capacity=len(st.devices),
                                                        allocatable=st.healthy, allocated=held, source="plugin"))
        listed, source = pods_view(s)
        resp.pods_source = source
        for p in listed:
            resp.pods.append(pb.PodStatus(namespace=p["namespace"], name=p["name"], uid=p["uid"], qos=p["qos"],
                                          containers=p["containers"], devices=p["devices"]))
        for ev in evictions_view(s):
            resp.evictions.append(pb.EvictionStatus(
                namespace=ev.get("pod_namespace", ""), pod=ev.get("pod_name", ""), pod_uid=ev.get("pod_uid", ""),
                reason=ev.get("reason", ""), signal=ev.get("signal", ""), action=ev.get("action", ""),
                wall_time=ev.get("wall_time", 0.0), evidence_json=json.dumps(ev.get("evidence", {}), sort_keys=True,
                                                                             default=str)))
        return resp

    def _detail(self, name: str) -> str:
        s = self._handles
        if name == self.name:
            return f"socket {self.socket_path}"
        if name in ("kubelet-pods", "slurm-jobs") and s.pods is not None:
            d = s.pods
            what = f"{len(d.current.containers)} containers, {len(d.current.devices)} devices held; {d.current.source}"
            return what + (f"; last error: {d.last_error}" if d.last_error else "")
        if name == "advisor" and s.advisor is not None:
            return s.advisor.summary()
        if name == "katalyst-eviction-plugin" and s.eviction_plugin is not None:
            p = s.eviction_plugin
            reg = {None: "not yet registered", True: "registered", False: f"registration failed: {p.registration_error}"}
            return f"socket {p.socket_path}, {reg[p.registered]}"
        if name == "nri" and self._nri is not None:
            from agent.contracts.nri import summary

            return summary(self._nri.state())
        if name == "dra-kubeletplugin" and s.dra_plugin is not None:
            st = s.dra_plugin.state()
            reg = {None: "not yet registered", True: "registered", False: f"registration failed: {st['error']}"}
            return (f"driver {st['driver']} on {st['endpoint']}, {reg[st['registered']]}, "
                    f"{st['prepare_calls']} prepare calls, {st['health_streams']} health streams")
        return ""

    def view(self, name: str) -> dict[str, Any]:
        from agent.status.views import cpus_view, memory_view, resources_view

        ctx = self._ctx
        assert ctx is not None
        if name == "resources":
            return resources_view(self._handles)
        if name == "cpus":
            return cpus_view(self._handles, _numa_cpus(ctx.topology))
        if name == "memory":
            return memory_view(self._handles)
        if name == "health":
            from agent.status.views import health_view

            return health_view(self._handles, ctx.component_health() if ctx.component_health else [])
        raise KeyError(name)

    # -- life cycle -----------------------------------------------------------------------
    async def start(self, ctx: DaemonContext) -> None:
        import grpc

        from agent.api.status.v1 import api_pb2 as pb
        from agent.api.status.v1 import api_pb2_grpc as pb_grpc
        from agent.status.views import ViewUnavailable
        from agent.unixsock import serve_unix

        component = self

        class Servicer(pb_grpc.DaemonStatusServicer):
            async def GetStatus(self, request, context):
                try:
                    return component.status()
                except Exception as e:
                    log.exception("status failed")
                    await context.abort(grpc.StatusCode.INTERNAL, f"status: {type(e).__name__}: {e}")

            async def GetView(self, request, context):
                try:
                    doc = component.view(request.name)
                except KeyError:
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                        f"unknown view {request.name!r} (known: resources, cpus, memory, health)")
                except ViewUnavailable as e:
                    await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
                except Exception as e:  # a view that breaks is our bug: say so, never UNKNOWN
                    log.exception("status view failed", view=request.name)
                    await context.abort(grpc.StatusCode.INTERNAL, f"view {request.name!r}: {type(e).__name__}: {e}")
                return pb.GetViewResponse(json_document=json.dumps(doc, sort_keys=True, default=str))

        self._ctx = ctx
        self._nri = ctx.lookup(NRI_PLUGIN)
        self._handles = Handles(
            cpu=ctx.lookup(CPU_POLICY), devices=ctx.lookup(DEVICE_MANAGER), plugins=ctx.lookup(DEVICE_PLUGINS),
            pods=ctx.lookup(POD_DIRECTORY), pressure=ctx.lookup(PRESSURE), eviction_plugin=ctx.lookup(EVICTION_PLUGIN),
            memory=ctx.lookup(MEMORY_MANAGER), advisor=ctx.lookup(EVICTION_GATE),
            dra_plugin=ctx.lookup(DRA_KUBELET_PLUGIN), workloads=ctx.lookup(WORKLOADS),
        )
        self.socket_path = status_socket(ctx.root_dir)
        from prometheus_client import REGISTRY

        from agent.grpcguard import new_server
        from agent.status.memorymetrics import MemoryCollector

        # the memory manager's accounting per node and page size, read at scrape time
        self._collector = MemoryCollector(lambda: self._handles.memory)
        REGISTRY.register(self._collector)

        server = new_server("status")
        pb_grpc.add_DaemonStatusServicer_to_server(Servicer(), server)
        await serve_unix(server, self.socket_path)
        ctx.remove_on_exit(self.socket_path)
        self._server = server
        # the same answers as HTTP/JSON for the CLI, root only (agent.status.httpapi)
        from agent.rootpaths import status_http_socket
        from agent.status.document import status_document
        from agent.status.httpapi import StatusHttpApi

        http = StatusHttpApi(status_http_socket(ctx.root_dir), lambda: status_document(self.status()), self.view)
        await http.start()
        ctx.remove_on_exit(http.path)
        self._http = http

    async def stop(self) -> None:
        if self._collector is not None:
            from prometheus_client import REGISTRY

            REGISTRY.unregister(self._collector)
            self._collector = None
        if self._http is not None:
            await self._http.close()
            self._http = None
        if self._server is not None:
            await self._server.stop(grace=0.5)
            self._server = None
        if self.socket_path is not None:
            try:
                self.socket_path.unlink()
            except FileNotFoundError:
                pass

    def healthy(self) -> bool:
        return self._server is not None and self._http is not None


def factory(ctx: DaemonContext) -> StatusComponent | None:
    return StatusComponent()
