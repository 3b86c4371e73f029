"""hwagent's NRI plugin as a daemon component ([nri] enabled; both modes).

NRI is one more front onto the same owners (docs/nri.md): the runtime
(containerd >= 1.7, CRI-O) calls the plugin at each pod and container event, and
the plugin answers with what the CPU policy, the memory manager and the topology
manager decide for the container (``agent.nri.placement``). The component starts
the plugin on the daemon's loop, where every other owner lives, so a placement
never interleaves with an admission or a QRM call.

Modes: both. In kubelet mode (the real deployment: the upstream kubelet, whose
CPU manager must be ``none``, with containerd or CRI-O) NRI is the only door
through which the placement reaches the kubelet's pods. In standalone mode the
runtime's pods are placed beside hwagent's own admitted pods by the same owners
(that is how the tests run it, without a kubelet).

Looks up ``CPU_POLICY``, ``MEMORY_MANAGER``, ``DEVICE_MANAGER`` and, in
standalone mode, ``WORKLOADS`` (started before it): a pod the registry holds is
admission's, never released or moved by this front. Publishes ``NRI_PLUGIN``
(the plugin's state, for `hwagent status`) and ``NRI_PODS``: the pods it holds
resources for, which standalone mode's ``ACTIVE_PODS`` joins to the registry's so
that residual cleanup leaves them alone. Until the runtime's first Synchronize
every pod the owners hold for this front counts as active (hwagent cannot tell a
gone pod from one not yet reported); after it, the pods the runtime reported.

Also publishes ``POD_DIRECTORY`` (``agent.nri.directory``: the runtime's pods by
cgroup, with the placement's QoS level; the kubelet's directory, started after,
joins it: ``agent.poddirectories``), so pressure, metrics and status name NRI
pods. Every ``CPU_MANAGER_RECHECK_S`` it reads the kubelet's CPU manager policy
(``agent.kubelet.cpumanager``): while it is not ``none`` no container is placed
(``Placer.paused``), and status says why and what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from agent.contracts import CPU_POLICY, DEVICE_MANAGER, MEMORY_MANAGER, WORKLOADS, DaemonContext
from agent.contracts.nri import NRI_PLUGIN, NRI_PODS
from agent.eventlog import get_logger
from agent.daemonconfig import DAEMON_SECTION
from agent.nri.config import NRI_SECTION, NriConfig

__all__ = ["CPU_MANAGER_RECHECK_S", "NriComponent", "factory"]

#: seconds between reads of the kubelet's CPU-manager files (two small files; it changes only with a kubelet restart)
CPU_MANAGER_RECHECK_S = 10.0

log = get_logger("hwagent.nri")


class NriComponent:
    name = "nri"

    def __init__(self, cfg: NriConfig) -> None:
        self.cfg = cfg
        self.plugin: Any = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._recheck: asyncio.Task[None] | None = None
        self._ctx: DaemonContext | None = None
        self._kubelet_root = "/var/lib/kubelet"
        #: what the kubelet's CPU-manager files said at the last read
        self._cpu_manager = ""

    async def start(self, ctx: DaemonContext) -> None:
        from agent.nri.placement import Placer
        from agent.nri.plugin import NriPlugin
        from agent.topologymanager import TopologyManager
        from agent.topologymanager.config import TOPOLOGY_MANAGER_SECTION

        self._ctx = ctx
        try:
            self.cfg.validate()
            tm = TopologyManager.for_topology(ctx.config[TOPOLOGY_MANAGER_SECTION], ctx.topology)
        except ValueError as e:
            raise RuntimeError(f"nri: {e}") from None
        registry = ctx.lookup(WORKLOADS)
        placer = Placer(tm, cpu_policy=ctx.lookup(CPU_POLICY), memory_manager=ctx.lookup(MEMORY_MANAGER),
                        device_manager=ctx.lookup(DEVICE_MANAGER), cgroup_v2=_cgroup_v2(ctx),
                        sysfs_root=ctx.config[DAEMON_SECTION].sysfs_root,
                        foreign=(lambda uid: registry.get(uid) is not None) if registry is not None else _none,
                        allow_opt_out=self.cfg.honor_opt_out)
        self.plugin = NriPlugin(self.cfg, placer=placer)
        self._stop = asyncio.Event()
        ctx.publish(NRI_PLUGIN, self)
        ctx.publish(NRI_PODS, self)
        self._publish_directory(ctx, placer)
        self._kubelet_root = ctx.config[DAEMON_SECTION].kubelet_root_dir
        await self._check_cpu_manager()
        self._task = asyncio.get_running_loop().create_task(self.plugin.run(self._stop), name="nri-plugin")
        self._recheck = asyncio.get_running_loop().create_task(self._recheck_cpu_manager(), name="nri-cpu-manager")
        log.info("nri plugin started", socket=self.cfg.socket_path, mode=ctx.mode,
                 name=f"{self.cfg.plugin_index}-{self.cfg.plugin_name}",
                 cpu_policy=placer.cpu_policy is not None, memory_manager=placer.memory_manager is not None)

    def _publish_directory(self, ctx: DaemonContext, placer: Any) -> None:
        from agent.nri.directory import NriPodDirectorySource
        from agent.poddirectories import publish_pod_directory

        plugin = self.plugin

        def placed_level(pod: Any, ctr: Any) -> str | None:
            rec = placer.placed.get(ctr.id) if ctr is not None else None
            return rec[2] if rec is not None else None

        publish_pod_directory(ctx, NriPodDirectorySource(
            plugin.view, ctx.topology.online, source=f"NRI runtime at {self.cfg.socket_path}", qos_of=placed_level,
            error=lambda: plugin.state.last_error))

    async def _check_cpu_manager(self) -> None:
        """Read the kubelet's CPU-manager files (in an executor) and pause or resume the placement."""
        from agent.kubelet.cpumanager import check

        v = await asyncio.get_running_loop().run_in_executor(None, check, self._kubelet_root)
        paused = f"{v.detail}; fix: {v.fix}" if v.conflict else ""
        placer = self.plugin.placer
        if paused != placer.paused:
            if paused:
                log.warning("nri placement refused", why="the kubelet's cpu manager places cpus too",
                            detail=v.detail, fix=v.fix)
            else:
                log.info("nri placement resumed", detail=v.detail)
        placer.paused = paused
        self._cpu_manager = v.detail

    async def _recheck_cpu_manager(self) -> None:
        while True:
            await asyncio.sleep(CPU_MANAGER_RECHECK_S)
            try:
                await self._check_cpu_manager()
            except Exception:
                log.exception("kubelet cpu manager check failed")

    def state(self) -> Mapping[str, Any]:
        if self.plugin is None:
            return {}
        paused = self.plugin.placer.paused if self.plugin.placer is not None else ""
        return {**self.plugin.snapshot(), "kubelet_cpu_manager": self._cpu_manager, "placement_paused": paused}

    def active_pod_uids(self) -> frozenset[str]:
        """NRI_PODS: before the runtime's first Synchronize, every pod held for this front;
        after it, the pods the runtime has."""
        p = self.plugin
        if p is None:
            return frozenset()
        if not p.state.synchronized:
            return frozenset(p.placer.held_pods()) if p.placer is not None else frozenset()
        return frozenset(pod.uid for pod in p.view.pods.values())

    async def stop(self) -> None:
        self._stop.set()
        if self._recheck is not None:
            self._recheck.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._recheck
            self._recheck = None
        if self._task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, 5)
            self._task = None
        if self._ctx is not None:
            self._ctx.withdraw(NRI_PLUGIN)
            self._ctx.withdraw(NRI_PODS)

    def healthy(self) -> bool:
        """Running: the plugin's loop is alive (a runtime that is away is a reconnect, not a failure)."""
        return self._task is not None and not self._task.done()


def _none(uid: str) -> bool:
    return False


def _cgroup_v2(ctx: DaemonContext) -> bool:
    """Whether containers' cpu controller is cgroup v2 (then reclaimed ones get ``cpu.idle``)."""
    from agent.cgroups.config import CGROUPS_SECTION
    from agent.cgroups.detect import CgroupError, detect

    try:
        return detect(ctx.config[CGROUPS_SECTION].root).is_v2("cpu")
    except CgroupError:
        return False


def factory(ctx: DaemonContext) -> NriComponent | None:
    cfg: NriConfig = ctx.config[NRI_SECTION]
    if not cfg.enabled:
        return None
    return NriComponent(cfg)
