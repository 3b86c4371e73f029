"""Start the CPU component by hand with a context like the daemon's."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from agent.contracts import DaemonContext
from agent.config import section_defaults
from agent.contracts import ACTIVE_PODS
from agent.cpu.component import CPUPolicyComponent
from agent.pods import StaticActivePods


def make_ctx(root: Path, topology, cgroup_root: Path, mode: str = "standalone", **cpu) -> DaemonContext:
    cfg = section_defaults()
    cfg = cfg.replace("daemon", root_dir=str(root), cgroup_root=str(cgroup_root), kubelet_root_dir=str(root / "kubelet"))
    if cpu:
        cfg = cfg.replace("cpu", **cpu)
    ctx = DaemonContext(
        config=cfg,
        root_dir=root,
        topology=topology,
        mode=mode,
        log=logging.getLogger("test"),
    )
    ctx.publish(ACTIVE_PODS, StaticActivePods())
    return ctx


def component(ctx: DaemonContext, clock=None) -> CPUPolicyComponent:
    cfg = ctx.config.sections["cpu"]
    return CPUPolicyComponent(cfg, clock=clock) if clock else CPUPolicyComponent(cfg)


__all__ = ["make_ctx", "component", "dataclasses"]
