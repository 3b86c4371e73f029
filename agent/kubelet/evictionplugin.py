"""Katalyst's EvictionPlugin v1alpha1, served from hwagent's pressure signals.

One unix socket ``<plugin_registration_dir>/<plugin_name>.sock`` carries both
the plugin-watcher handshake (pluginregistration v1 ``GetInfo`` with type
``EvictionPlugin``, ``NotifyRegistrationStatus``) and the EvictionPlugin
service, the way Katalyst's eviction manager discovers plugins in its
``--plugin-registration-dir``.

- ``ThresholdMet``: the worst pool's run-queue delay per CPU against the
  soft/hard threshold, operator GREATER_THAN, scope ``EVICTION_SCOPE``, node
  condition ``CPUPressure`` (effect NoSchedule) while met, and the candidates.
- ``GetTopEvictionPods``: up to topN candidates in hwagent's order, taken from
  the request's active pods; the cool-down starts when candidates are given.
- ``GetEvictPods``: pods holding a device the health board marks unhealthy,
  when ``[kubelet] evict_on_unhealthy_device`` asks for it (off by default).
- ``GetToken``: a token fixed for this daemon run.

It publishes the ``EVICTOR`` pressure asks at each eviction (``KatalystDecides``):
while Katalyst holds the registration it accepts, records and leaves the pod to
Katalyst, so pressure's own report (hook) does not name a pod twice; while
Katalyst does not, it declines and pressure reports. Nothing is swapped in the
pressure engine. Samples are computed in an executor and handed to the watch on
the loop, which owns it.

Publishes ``EVICTION_PLUGIN`` (an ``EvictionPluginView``, for status) and
``EVICTOR``. Looks up at start ``PRESSURE``, ``DEVICE_HEALTH`` and
``POD_DIRECTORY``, all started before it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from agent.pressure.config import PRESSURE_SECTION
from agent.api.evictionplugin.v1alpha1 import api_pb2 as ep
from agent.api.evictionplugin.v1alpha1 import api_pb2_grpc as ep_grpc
from agent.api.k8s.core.v1 import api_pb2 as core
from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from agent.contracts import (
    DEVICE_HEALTH,
    EVICTION_PLUGIN,
    EVICTOR,
    POD_DIRECTORY,
    PRESSURE,
    DeviceHealth,
    PodDirectorySource,
    PressureSignals,
)
from agent.contracts import DaemonContext
from agent.eventlog import get_logger
from agent.kubelet.config import KUBELET_SECTION, KubeletConfig
from agent.kubelet.pressure_signal import NOT_MET, Candidate, PoolWatch
from agent.contracts.pressure import Eviction
from agent.pressure.eviction import EvictionPolicy
from agent.tasks import cancel_and_wait

log = get_logger("hwagent.kubelet")

__all__ = ["EvictionPluginServicer", "EvictionPluginComponent", "factory", "EVICTION_SCOPE", "PLUGIN_TYPE"]

PLUGIN_TYPE = "EvictionPlugin"
API_VERSION = "v1alpha1"
EVICTION_SCOPE = "hwagent.cpu.runqueue_delay"
CONDITION = "CPUPressure"
_MET = {0: ep.NOT_MET, 1: ep.SOFT_MET, 2: ep.HARD_MET}


def _pod_message(c: Candidate) -> core.Pod:
    pod = core.Pod()
    pod.metadata.name = c.name
    pod.metadata.namespace = c.namespace
    pod.metadata.uid = c.pod_uid
    return pod


def pick_pods(candidates: Sequence[Candidate], active: Sequence[core.Pod]) -> list[core.Pod]:
    """The candidates as Pod messages: the caller's own objects when it listed active pods
    (a candidate it does not list is not active for it), built from hwagent's names otherwise."""
    if not active:
        return [_pod_message(c) for c in candidates]
    by_uid = {p.metadata.uid: p for p in active if p.metadata.uid}
    return [by_uid[c.pod_uid] for c in candidates if c.pod_uid in by_uid]


class EvictionPluginServicer(ep_grpc.EvictionPluginServicer):
    def __init__(self, plugin: EvictionPluginComponent) -> None:
        self.p = plugin

    async def GetToken(self, request, context):
        return ep.GetTokenResponse(token=self.p.token)

    async def ThresholdMet(self, request, context):
        v = self.p.watch.verdict()
        resp = ep.ThresholdMetResponse(
            threshold_value=v.threshold, observed_value=round(v.observed, 6),
            threshold_operator=ep.GREATER_THAN, met_type=_MET[v.level], eviction_scope=EVICTION_SCOPE,
            condition=ep.Condition(condition_type=ep.NODE_CONDITION, effects=["NoSchedule"], condition_name=CONDITION,
                                   met_condition=v.level != NOT_MET),
        )
        if self.p.cfg.eviction_grace_period_s >= 0:
            resp.grace_period_seconds = self.p.cfg.eviction_grace_period_s
        if v.level != NOT_MET:
            cands = self.p.watch.candidates(time.monotonic(), 10_000, start_cooldown=False)
            resp.candidate_pods.extend(pick_pods(cands, request.active_pods))
        return resp

    async def GetTopEvictionPods(self, request, context):
        if request.eviction_scope and request.eviction_scope != EVICTION_SCOPE:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"eviction scope {request.eviction_scope!r} is not this plugin's ({EVICTION_SCOPE!r})")
        top_n = request.topN or 1
        active = list(request.active_pods)
        cands = self.p.watch.candidates(time.monotonic(), top_n if not active else max(top_n, len(active)),
                                        start_cooldown=False)
        pods = pick_pods(cands, active)[:top_n]
        resp = ep.GetTopEvictionPodsResponse(target_pods=pods)
        if pods:
            self.p.watch.cooldown_until = time.monotonic() + self.p.watch.policy.cooldown_s
            chosen = {p.metadata.uid for p in pods}
            self.p.handed_out([c for c in cands if c.pod_uid in chosen])
        if self.p.cfg.eviction_grace_period_s >= 0:
            resp.deletion_options.grace_period_seconds = self.p.cfg.eviction_grace_period_s
        return resp

    async def GetEvictPods(self, request, context):
        resp = ep.GetEvictPodsResponse()
        for pod, reason in self.p.unhealthy_device_pods(request.active_pods):
            resp.evict_pods.append(ep.EvictPod(pod=pod, reason=reason, eviction_plugin_name=self.p.cfg.plugin_name))
        return resp


class RegistrationServicer(reg_grpc.RegistrationServicer):
    def __init__(self, plugin: EvictionPluginComponent) -> None:
        self.p = plugin

    async def GetInfo(self, request, context):
        return reg_pb.PluginInfo(type=PLUGIN_TYPE, name=self.p.cfg.plugin_name, endpoint=str(self.p.socket_path),
                                 supported_versions=[API_VERSION])

    async def NotifyRegistrationStatus(self, request, context):
        self.p.set_registered(request.plugin_registered, request.error)
        return reg_pb.RegistrationStatusResponse()


class KatalystDecides:
    """The eviction plugin's ``Evictor``: while Katalyst holds the plugin registration,
    pressure's evictions are Katalyst's to carry out (it asks GetTopEvictionPods):
    recorded, nothing done here; the kubelet owns the pod and releases its resources."""

    name = "katalyst"

    def __init__(self, plugin: EvictionPluginComponent) -> None:
        self._plugin = plugin

    def accepting(self) -> bool:
        return self._plugin.registered is True

    def execute(self, ev: Eviction, cgroup_paths: list[str]) -> dict[str, Any]:
        return {"deferred_to": "katalyst eviction manager"}


class EvictionPluginComponent:
    name = "katalyst-eviction-plugin"

    def __init__(self, cfg: KubeletConfig) -> None:
        self.cfg = cfg
        self.token = uuid.uuid4().hex
        self.socket_path = Path(cfg.plugin_registration_dir) / f"{cfg.plugin_name}.sock"
        self.watch = PoolWatch(EvictionPolicy())
        self.registered: bool | None = None
        self.registration_error = ""
        self.recent: deque[dict[str, Any]] = deque(maxlen=50)
        self._pressure: PressureSignals | None = None
        self._board: DeviceHealth | None = None
        self._pods: PodDirectorySource | None = None
        self._server: grpc.aio.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._ctx: DaemonContext | None = None

    # -- state other parts read ----------------------------------------------------------
    def _engine(self) -> PressureSignals | None:
        return self._pressure

    def handed_out(self, cands: Sequence[Candidate]) -> None:
        for c in cands:
            rec = {"pod_uid": c.pod_uid, "pod_namespace": c.namespace, "pod_name": c.name, "reason": "cpu_pressure",
                   "signal": "runqueue_delay", "action": "katalyst", "wall_time": time.time(),
                   "evidence": {"pool": c.pool, "qos": c.qos, "pod_share": c.share,
                                "pod_wait_s_per_s": c.wait_s_per_s}}
            self.recent.append(rec)
            log.warning(
                "eviction candidate", pod=f"{c.namespace}/{c.name}", uid=c.pod_uid, pool=c.pool, qos=c.qos,
                share=round(c.share, 3), to="katalyst",
            )

    def unhealthy_device_pods(self, active: Sequence[core.Pod]) -> list[tuple[core.Pod, str]]:
        if not self.cfg.evict_on_unhealthy_device:
            return []
        board, pods = self._board, self._pods
        if board is None or pods is None:
            return []
        by_name = {(p.metadata.namespace, p.metadata.name): p for p in active}
        out = []
        for (resource, dev), h in sorted(pods.current.devices.items()):
            ok, why = board.health_of(dev)
            pod = by_name.get((h.namespace, h.pod))
            if not ok and pod is not None:
                out.append((pod, f"device {resource}/{dev} unhealthy: {why}"))
        return out

    def set_registered(self, ok: bool, error: str) -> None:
        """Katalyst's answer; ``KatalystDecides`` accepts evictions while it is yes."""
        self.registered, self.registration_error = ok, error
        if ok:
            log.info("eviction plugin registered", name=self.cfg.plugin_name, socket=self.socket_path)
        else:
            log.error("eviction plugin registration failed", name=self.cfg.plugin_name, error=error)

    # -- life cycle ------------------------------------------------------------------------
    async def start(self, ctx: DaemonContext) -> None:
        from agent.unixsock import serve_unix

        self._pressure = ctx.lookup(PRESSURE)
        self._board = ctx.lookup(DEVICE_HEALTH)
        self._pods = ctx.lookup(POD_DIRECTORY)
        pc = ctx.config[PRESSURE_SECTION]
        self.watch = PoolWatch(EvictionPolicy(pc.soft_threshold, pc.hard_threshold, pc.window_s, pc.interval_s,
                                              pc.met_fraction, pc.cooldown_s, pc.psi_confirm))
        from agent.grpcguard import new_server

        server = new_server("evictionplugin")
        ep_grpc.add_EvictionPluginServicer_to_server(EvictionPluginServicer(self), server)
        reg_grpc.add_RegistrationServicer_to_server(RegistrationServicer(self), server)
        await serve_unix(server, self.socket_path)
        self._server = server
        ctx.remove_on_exit(self.socket_path)
        ctx.publish(EVICTION_PLUGIN, self)
        ctx.publish(EVICTOR, KatalystDecides(self))
        self._ctx = ctx
        self._task = asyncio.create_task(self._run(pc.interval_s), name="eviction-plugin")
        log.info("eviction plugin serving", socket=self.socket_path, scope=EVICTION_SCOPE)

    async def _run(self, interval: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            engine = self._engine()
            if engine is not None:
                containers = list(engine.containers)
                try:
                    wait = await loop.run_in_executor(None, engine.container_wait_ns, engine.last_runqueue)
                    self.watch.observe(time.monotonic(), containers, wait)
                except Exception:
                    log.exception("eviction plugin sample failed")
            await asyncio.sleep(interval)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self.registered = None  # nobody to hand evictions to: pressure reports them again
        if self._ctx is not None:
            self._ctx.withdraw(EVICTOR)
        if self._server is not None:
            await self._server.stop(grace=0.5)
            self._server = None
        try:
            self.socket_path.unlink()
        except FileNotFoundError:
            pass

    def healthy(self) -> bool:
        return self._task is not None and not self._task.done()


def factory(ctx: DaemonContext) -> EvictionPluginComponent | None:
    cfg: KubeletConfig = ctx.config[KUBELET_SECTION]
    if ctx.mode != "kubelet" or not cfg.eviction_plugin or not ctx.config[PRESSURE_SECTION].enabled:
        return None
    return EvictionPluginComponent(cfg)
