"""The pod directory component: who runs in which cgroup, refreshed on the loop.

Kubelet mode only. Every ``refresh_s`` it asks the kubelet's pod-resources API
(List, GetAllocatableResources) on the loop, walks the kubepods tree and the
log layout in an executor, joins them (``resolve.build_directory``) and swaps
the new ``PodDirectory`` in.

Publishes ``POD_DIRECTORY`` (a ``PodDirectorySource``; joined behind the NRI
front's where that runs: ``agent.poddirectories``). Looks up ``CPU_POLICY``
at start (started before it): its allocations name containers the kubelet's
pod-resources do not.

A kubelet restart recreates its socket: the client redials and the last good
snapshot keeps serving names meanwhile (cgroups are still re-walked, so gone
containers disappear even while the kubelet is away).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from agent.cgroups.config import CGROUPS_SECTION
from agent.daemonconfig import DAEMON_SECTION
from agent.contracts import CPU_POLICY, CPUAllocations
from agent.cpuset import CPUSet
from agent.contracts import DaemonContext
from agent.eventlog import get_logger
from agent.kubelet.config import KUBELET_SECTION, KubeletConfig
from agent.contracts.poddirectory import PodDirectory, PodResourcesSnapshot
from agent.poddirectories import publish_pod_directory
from agent.rootpaths import kubelet_pod_resources_socket
from agent.tasks import cancel_and_wait, run_every

log = get_logger("hwagent.kubelet")

__all__ = ["KubeletPodDirectorySource", "PodDirectoryComponent", "factory", "pod_resources_socket"]


def pod_resources_socket(cfg: KubeletConfig, kubelet_root_dir: str) -> Path:
    if cfg.pod_resources_socket:
        return Path(cfg.pod_resources_socket)
    return kubelet_pod_resources_socket(kubelet_root_dir)


class KubeletPodDirectorySource:
    """The ``PodDirectorySource`` this component publishes: the current directory and the refresh state."""

    def __init__(self, socket: Path, node_cpus: CPUSet) -> None:
        self.socket = socket
        self.node_cpus = node_cpus
        self.current = PodDirectory()
        self.snapshot: PodResourcesSnapshot | None = None
        self.last_error = ""
        self.refreshes = 0

    def containers_for_pressure(self) -> list[Any]:
        """The directory's containers as the pressure evaluator's ``Container`` values."""
        return self.current.pressure_containers(self.node_cpus)


class PodDirectoryComponent:
    name = "kubelet-pods"

    def __init__(self, cfg: KubeletConfig) -> None:
        self.cfg = cfg
        self.service: KubeletPodDirectorySource | None = None
        self._task: asyncio.Task[None] | None = None
        self._client: Any = None
        self._ctx: DaemonContext | None = None
        self._roots: tuple[Path, Path | None] | None = None
        self._cpu: CPUAllocations | None = None

    async def start(self, ctx: DaemonContext) -> None:
        from agent.cgroups.hierarchy import detect_hierarchy
        from agent.cgroups.mounts import cgroup_mounts
        from agent.kubelet.client import PodResourcesClient

        self._ctx = ctx
        self._cpu = ctx.lookup(CPU_POLICY)
        dcfg = ctx.config[DAEMON_SECTION]
        sock = pod_resources_socket(self.cfg, dcfg.kubelet_root_dir)
        self._client = PodResourcesClient(sock)
        self.service = KubeletPodDirectorySource(sock, ctx.topology.online)
        try:
            h = detect_hierarchy(ctx.config[CGROUPS_SECTION].hierarchy, dcfg.procfs_root)
            mounts = cgroup_mounts(dcfg.procfs_root)
            self._roots = (h.mount, mounts.get("cpuset", h.mount) if not h.is_v2 else h.mount)
        except ValueError as e:
            log.warning("kubepods unavailable", error=e)
            self._roots = None
        await self.refresh_once()
        publish_pod_directory(ctx, self.service)  # behind the NRI front's names where it runs (agent.poddirectories)
        self._task = asyncio.create_task(
            run_every(lambda: self.cfg.refresh_s, self.refresh_once, log, "kubelet pod directory refresh"), name="kubelet-pods")

    def _walk(self, snapshot: PodResourcesSnapshot | None, allocs: list[Any]) -> PodDirectory:
        from agent.cgroups.kubepods import walk_kubepods
        from agent.kubelet.logs import read_log_names
        from agent.kubelet.resolve import build_directory

        cgroup_root = self._ctx.config[CGROUPS_SECTION].kubelet_cgroup_root if self._ctx else "/"
        cgroups = walk_kubepods(self._roots[0], cgroup_root, self._roots[1]) if self._roots else []
        logs = read_log_names(self.cfg.log_dir)
        assert self.service is not None
        source = f"kubelet pod-resources {self.service.socket}" if snapshot else "kubepods tree and kubelet logs"
        return build_directory(cgroups, snapshot, logs, allocs, source=source, at=time.monotonic())

    def _allocations(self) -> list[Any]:
        from agent.kubelet.resolve import CPUAllocation

        policy = self._cpu
        if policy is None:
            return []
        out = []
        try:
            for r in policy.allocations():
                out.append(CPUAllocation(r.pod_uid, getattr(r, "pod_namespace", "") or "",
                                         getattr(r, "pod_name", "") or "", r.container_name,
                                         str(getattr(r, "qos_level", "") or ""), getattr(r, "cgroup_path", None)))
        except Exception as e:  # names from the CPU policy are a bonus, never a reason to stop
            log.warning("cpu allocations unreadable", error=repr(e))
        return out

    async def refresh_once(self) -> PodDirectory:
        from agent.kubelet.client import PodResourcesUnavailable

        svc = self.service
        assert svc is not None and self._client is not None
        try:
            svc.snapshot = await self._client.snapshot()
            if svc.last_error:
                log.info("podresources reachable", socket=svc.socket)
            svc.last_error = ""
        except PodResourcesUnavailable as e:
            if str(e) != svc.last_error:
                log.warning("podresources unavailable", error=e)
            svc.last_error = str(e)
        allocs = self._allocations()
        svc.current = await asyncio.get_running_loop().run_in_executor(None, self._walk, svc.snapshot, allocs)
        svc.refreshes += 1
        return svc.current

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        if self._client is not None:
            await self._client.close()

    def healthy(self) -> bool:
        return self._task is not None and not self._task.done()


def factory(ctx: DaemonContext) -> PodDirectoryComponent | None:
    cfg: KubeletConfig = ctx.config[KUBELET_SECTION]
    if ctx.mode != "kubelet" or not cfg.pod_awareness:
        return None
    return PodDirectoryComponent(cfg)
