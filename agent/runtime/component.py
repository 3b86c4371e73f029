"""The workload runtime as a daemon component (standalone mode only).

Starts after admission (``agent.workloads.component``): it publishes
``RUNTIME`` for admission to hand pods to, then restores: every pod the
registry still holds as admitted is re-attached (or started, if the daemon
died before it ran), every cgroup and state directory of a pod the registry
no longer holds is killed and removed. Either can run without the other (a
registry without a runtime admits only; a runtime without a registry reports
to nobody).

Publishes ``RUNTIME`` (a ``PodRuntime``) and ``EVICTOR`` (``RuntimeEviction``:
pressure evicts the pods it runs through it; pressure, started before it, holds
a deferred ``EVICTOR``). Looks up, at start, ``WORKLOADS``
(the registry it reports pod status to and restores from) and ``CPU_POLICY``
(to bind containers' cgroups), both started before it; admission, started
before it too, holds a deferred ``RUNTIME``.

Stop: with ``stop_workloads_on_exit`` every pod is stopped (SIGTERM, its grace
period, kill), otherwise the runtime only detaches and the workloads keep
running under their shims, to be re-attached at the next start.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from collections.abc import Callable
from typing import Any

from agent.cgroups.config import CGROUPS_SECTION
from agent.daemonconfig import DAEMON_SECTION
from agent.cgroups.detect import CgroupError, detect
from agent.cgroups.devbpf import DevicePrograms
from agent.cgroups.workload import WorkloadCgroups
from agent.contracts import DaemonContext
from agent.contracts import CPU_POLICY, DEVICE_PLUGINS, EVICTOR, RUNTIME, WORKLOADS
from agent.contracts.dra import DRA_POD_CLAIMS
from agent.eventlog import get_logger
from agent.runtime.cdi import CDIError, resolve
from agent.runtime.config import RUNTIME_SECTION, RuntimeConfig
from agent.runtime.eviction import RuntimeEviction
from agent.runtime.logdir import LOGS, LOGS_MODE
from agent.runtime.runtime import WorkloadRuntime
from agent.runtime.state import DIR_MODE, STATE_DIR
from agent.safepath import ensure_private_tree, opened_dir

__all__ = ["RuntimeComponent", "factory", "node_memory", "prepare_dirs"]

log = get_logger("hwagent.runtime")


def node_memory(procfs_root: str = "/proc") -> int | None:
    """MemTotal in bytes (the most a container's memory limit may ask for)."""
    try:
        for line in (Path(procfs_root) / "meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def hugepage_sizes(sysfs_root: str = "/sys") -> Callable[[], tuple[int, ...]]:
    """The page sizes (bytes) a process could get pages of now: a pool with pages
    (``nr_hugepages``) or overcommit (``nr_overcommit_hugepages``). Read when a container
    is planned, so a pool reserved after the daemon started is limited too."""
    base = os.path.join(sysfs_root, "kernel", "mm", "hugepages")

    def read() -> tuple[int, ...]:
        # strings, not a Path per directory and file: this runs for every container started
        out: list[int] = []
        try:
            names = sorted(os.listdir(base))
        except OSError:
            return ()
        for name in names:
            if not (name.startswith("hugepages-") and name.endswith("kB")):
                continue
            try:
                size = int(name[len("hugepages-"):-2]) * 1024
                pages = sum(_read_int(f"{base}/{name}/{f}") for f in ("nr_hugepages", "nr_overcommit_hugepages"))
            except (OSError, ValueError):
                continue
            if pages > 0:
                out.append(size)
        return tuple(out)

    return read


def _read_int(path: str) -> int:
    with open(path, "rb") as f:
        return int(f.read())


def prepare_dirs(root_dir: Path) -> None:
    """``<root>/runtime`` and ``<root>/logs`` and the per-pod directories in them,
    owner-only before restore reads them (an older hwagent made them 0755, so
    any local user could list the pods and UIDs); a link there is refused.
    ``logs`` itself is 0711: a pod's user passes through it to its own directory."""
    try:
        for d in (STATE_DIR, LOGS):
            ensure_private_tree(root_dir, d, DIR_MODE)
        with opened_dir(root_dir, LOGS) as fd:
            os.fchmod(fd, LOGS_MODE)
    except OSError as e:
        raise RuntimeError(f"workload runtime cannot start: {e.strerror or e}") from None


class RuntimeComponent:
    name = "runtime"

    def __init__(self, cfg: RuntimeConfig) -> None:
        self.cfg = cfg
        self.runtime: WorkloadRuntime | None = None
        self._ctx: DaemonContext | None = None

    async def start(self, ctx: DaemonContext) -> None:
        self._ctx = ctx
        dcfg = ctx.config[DAEMON_SECTION]
        cg = ctx.config[CGROUPS_SECTION]
        try:
            layout = detect(cg.root)
            bpf = self.cfg.devices_bpf == "always" or (self.cfg.devices_bpf == "auto" and layout.mode == "v2")
            cgroups = WorkloadCgroups(layout, cg.runtime_subtree, DevicePrograms() if bpf else None,
                                      reclaimed_subtree=cg.reclaimed_subtree())
        except (CgroupError, ValueError) as e:
            raise RuntimeError(f"workload runtime cannot start: {e}") from None
        prepare_dirs(ctx.root_dir)
        registry = ctx.lookup(WORKLOADS)
        cpu = ctx.lookup(CPU_POLICY)
        self.runtime = WorkloadRuntime(
            self.cfg,
            cgroups,
            ctx.root_dir,
            sink=lambda: registry,
            cpu_policy=lambda: cpu,
            managed_devices=self._managed_devices,
            node_memory=node_memory(dcfg.procfs_root),
            hugepage_sizes=hugepage_sizes(dcfg.sysfs_root),
        )
        ctx.publish(RUNTIME, self.runtime)
        ctx.publish(EVICTOR, RuntimeEviction(self.runtime, asyncio.get_running_loop()))
        pods = list(registry.admitted()) if registry is not None else []
        await self.runtime.restore(pods)
        log.info(
            "runtime started", subtree=cgroups.subtree, reclaimed_subtree=cgroups.reclaimed or "-",
            hierarchy=cgroups.layout.mode, shim=self.runtime.shim[-1],
            restored=len(pods), stop_workloads_on_exit=self.cfg.stop_workloads_on_exit,
        )

    def _managed_devices(self) -> list[str]:
        """Device nodes hwagent hands out (plus the ``managed_devices`` globs of the config, added by
        the runtime): every node of every device the rules offer, through a device plugin or DRA
        (held or not), and every node granted to an admitted pod, the nodes of its CDI names
        included (a claim's devices, a plugin that answers with CDI names). A claim's nodes come
        through CDI: before they were counted, a claimed device was open to every other pod."""
        assert self._ctx is not None
        out: list[str] = []
        for offer in (self._ctx.lookup(DEVICE_PLUGINS), self._ctx.lookup(DRA_POD_CLAIMS)):
            if offer is not None:
                out += offer.device_nodes()
        registry: Any = self._ctx.lookup(WORKLOADS)
        per_pod: list[list[str]] = []
        for pod in registry.admitted() if registry is not None else ():
            cdi: list[str] = []
            for a in pod.assignments.values():
                out += [d.host_path for d in a.grant.devices]
                cdi += a.grant.cdi_devices
            if cdi:
                per_pod.append(cdi)
        try:  # the spec directories read once for every pod's names
            out += [d.host_path for d in resolve(dict.fromkeys(n for c in per_pod for n in c),
                                                 self.cfg.cdi_spec_dirs).devices]
        except CDIError:
            for cdi in per_pod:  # one pod's unknown name must not hide the others' nodes
                try:
                    out += [d.host_path for d in resolve(dict.fromkeys(cdi), self.cfg.cdi_spec_dirs).devices]
                except CDIError:
                    pass  # such a pod cannot start (its plan resolves the same names and fails)
        return out

    async def stop(self) -> None:
        if self.runtime is not None:
            await self.runtime.close(stop_workloads=self.cfg.stop_workloads_on_exit)
        if self._ctx is not None:
            self._ctx.withdraw(RUNTIME)
            self._ctx.withdraw(EVICTOR)

    def healthy(self) -> bool:
        return self.runtime is not None


def factory(ctx: DaemonContext) -> RuntimeComponent | None:
    cfg: RuntimeConfig = ctx.config[RUNTIME_SECTION]
    if not cfg.enabled or ctx.mode != "standalone":
        return None
    return RuntimeComponent(cfg)
