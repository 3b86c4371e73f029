"""The Slurm jobs component: which Slurm job and step runs in which cgroup, refreshed on the loop.

Standalone mode with ``[slurm] enabled``. Every ``refresh_s`` it walks Slurm's cgroup
tree in an executor (``agent.slurm.layout``: v1 ``slurm[_<node>]/uid_<u>/job_<j>/step_<s>``,
v2 ``.../slurmstepd.scope/job_<j>/step_<s>``), asks Slurm for the user and partition
of the jobs it has not seen (``agent.slurm.jobinfo``: one ``squeue`` call, cached),
joins them (``agent.slurm.jobs.build_directory``) and swaps the new directory in.

Publishes ``POD_DIRECTORY`` (joined behind an earlier front's, agent.poddirectories):
the same door kubelet-mode and NRI pods reach the pressure engine and status through,
so Slurm's steps are listed and labelled by the owners that already do it for pods
(this component names; it measures only what its own series need, below).

The devices a job holds are named from Slurm's own words (agent.slurm.gresmap: the job's
GRES indexes, slurmd's records) joined with the devices hwagent offers (``DEVICE_PLUGINS``,
looked up: started before it), whose health the job's series then carry.

It reads cgroupfs and runs Slurm's client programs; it writes nothing of Slurm's.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from agent.contracts import DEVICE_PLUGINS, DaemonContext
from agent.poddirectories import publish_pod_directory
from agent.eventlog import get_logger
from agent.slurm.config import SLURM_SECTION, SlurmConfig
from agent.tasks import cancel_and_wait, run_every

log = get_logger("hwagent.slurm")

__all__ = ["SlurmJobsComponent", "factory", "node_name"]


def node_name(cfg: SlurmConfig) -> str:
    """This node's Slurm name: the configured one, else the short host name (slurmd's default)."""
    return cfg.node_name or socket.gethostname().split(".")[0]


class SlurmJobsComponent:
    name = "slurm-jobs"

    def __init__(self, cfg: SlurmConfig) -> None:
        self.cfg = cfg
        self.service: Any = None
        self._task: asyncio.Task[None] | None = None
        self._collector: Any = None
        self._devices: Any = None

    async def start(self, ctx: DaemonContext) -> None:
        from prometheus_client import REGISTRY

        from agent.daemonconfig import DAEMON_SECTION
        from agent.slurm.metrics import SlurmStepCollector
        from agent.slurm.source import SlurmJobSource

        svc = SlurmJobSource.for_daemon(ctx, self.cfg, node_name(self.cfg))
        self.service = svc
        self._devices = ctx.lookup(DEVICE_PLUGINS)
        await self.refresh_once()
        publish_pod_directory(ctx, svc)
        self._collector = SlurmStepCollector(lambda: (svc.snapshot.steps, svc.snapshot.readings, svc.snapshot.held),
                                             self.cfg.max_step_series,
                                             labels_on=ctx.config[DAEMON_SECTION].metrics_pod_labels)
        REGISTRY.register(self._collector)
        self._task = asyncio.create_task(
            run_every(lambda: self.cfg.refresh_s, self.refresh_once, log, "slurm job directory refresh"), name="slurm-jobs")

    async def refresh_once(self) -> None:
        svc = self.service
        assert svc is not None
        plugins = self._devices  # their states are the loop's: read here, handed to the executor
        states = [*plugins.plugin_states(), *plugins.dra_states()] if plugins is not None else []
        await asyncio.get_running_loop().run_in_executor(None, svc.refresh, states)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        if self._collector is not None:
            from prometheus_client import REGISTRY

            REGISTRY.unregister(self._collector)
            self._collector = None

    def healthy(self) -> bool:
        return self._task is not None and not self._task.done()


def factory(ctx: DaemonContext) -> SlurmJobsComponent | None:
    cfg: SlurmConfig = ctx.config[SLURM_SECTION]
    if ctx.mode != "standalone" or not cfg.enabled:
        return None
    return SlurmJobsComponent(cfg)
