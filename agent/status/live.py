"""The overlay the picture draws: a running daemon's state, asked the way `hwagent cpus`,
`resources` and `memory` ask it (issue 37 item 4: the picture read the checkpoint and the
config's metrics address, and disagreed with the running daemon).

Thin adapter. With a daemon answering under the root dir: its ``cpus`` view (pools, which
may share CPUs, dedicated allocations, and the pools' run-queue pressure from its pressure
engine), its ``resources`` view (devices, health, holders) and its ``memory`` view (each
pod's memory per NUMA node). With none: the CPU policy's and the device host's checkpoints
(``agent.status.offline``) and the config's ``/metrics`` address, and a note that the
picture is drawn from files. Whatever is missing is left out and said in
``Overlay.notes``; nothing here raises for a daemon that is not there.
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from agent.daemonconfig import DAEMON_SECTION
from agent.cpuset import CPUSet
from agent.topology.overlay import AllocationMark, DeviceMark, MemoryMark, Overlay, PoolMark

__all__ = ["from_daemon", "parse_pool_pressure", "memory_marks", "cpu_marks", "device_marks"]

_PRESSURE = re.compile(r'^hwagent_pool_cpu_pressure_ratio\{[^}]*pool="([^"]+)"[^}]*\}\s+([0-9.eE+-]+|NaN)\s*$', re.M)

#: the policy's owner name of dedicated allocations (agent.cpu.qos.DEDICATED_OWNER)
_DEDICATED = "dedicated"


def parse_pool_pressure(metrics_text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for pool, value in _PRESSURE.findall(metrics_text):
        try:
            v = float(value)
        except ValueError:
            continue
        if v == v:  # not NaN
            out[pool] = v
    return out


def _pressure(metrics_address: str, timeout: float) -> dict[str, float] | None:
    try:
        with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=timeout) as r:  # noqa: S310 (loopback)
            return parse_pool_pressure(r.read().decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None


def memory_marks(view: dict) -> tuple[MemoryMark, ...]:
    """The ``memory`` view's blocks (agent.status.memoryview) split per NUMA node."""
    out = []
    for c in view.get("containers", ()):
        who = f"{c['namespace']}/{c['pod']}" if c["pod"] else c["pod_uid"]
        for b in c["blocks"]:
            for node, size in b["per_node"].items():
                out.append(MemoryMark(who, c["container"], b["resource"], int(node), int(size)))
    return tuple(out)


def _memory(root: Path, timeout: float) -> tuple[tuple[MemoryMark, ...], str | None]:
    """Each pod's memory per node from the running daemon, or why there is none."""
    from agent.status.client import DaemonNotRunning, ask_view

    try:
        return memory_marks(ask_view(root, "memory", timeout_s=timeout)), None
    except DaemonNotRunning:
        return (), "no memory per node: no running daemon answers on its status socket"
    except Exception as e:  # noqa: BLE001 - a StatusError (no memory manager) or a view we cannot read
        return (), f"no memory per node: {getattr(e, 'message', None) or e}"


def cpu_marks(pools: dict[str, CPUSet], allocations: list[dict], pressure: dict[str, float] | None
              ) -> tuple[tuple[PoolMark, ...], tuple[AllocationMark, ...]]:
    """The pools (dedicated CPUs left out: they are drawn as allocations) and the dedicated
    allocations of a ``cpus`` view (live, or summarised from the checkpoint)."""
    marks = tuple(PoolMark(name, cpus, (pressure or {}).get(name))
                  for name, cpus in sorted(pools.items()) if name != _DEDICATED and cpus)
    allocs = tuple(
        AllocationMark(f"{a['namespace']}/{a['pod']}" if a["pod"] else a["pod_uid"], a["container"],
                       CPUSet.parse(a["cpus"]), _DEDICATED)
        for a in allocations
        if a["cpus"] and (a["qos_level"] == "dedicated_cores" or a["pool"] == _DEDICATED)
    )
    return marks, allocs


def device_marks(view: dict) -> tuple[DeviceMark, ...]:
    """Each device of a ``resources`` view (the device-plugin host's, live or from its
    checkpoint) with its health, NUMA nodes and holder."""
    holder: dict[tuple[str, str], str] = {}
    for a in view["allocations"]:
        who = f"{a['namespace']}/{a['pod']}" if a["pod"] else a["pod_uid"]
        for dev in a["devices"]:
            holder[(a["resource"], dev)] = who
    return tuple(
        DeviceMark(d["id"], name, d["health"] == "Healthy", tuple(d["numa"]), holder.get((name, d["id"])))
        for name, r in view["resources"].items()
        for d in r["devices"]
    )


def _running(root: Path, timeout: float) -> Overlay | None:
    """The running daemon's own answers (its ``cpus``, ``resources`` and ``memory`` views, the
    pools' pressure in the first), as ``hwagent cpus``, ``resources`` and ``memory`` ask them;
    None when no daemon answers under ``root``."""
    from agent.status.client import DaemonNotRunning, NotAllowed, StatusError, ask_view

    notes: list[str] = []
    sources: list[str] = []
    pools: tuple[PoolMark, ...] = ()
    allocs: tuple[AllocationMark, ...] = ()
    devices: tuple[DeviceMark, ...] = ()
    wait = max(timeout, 2.0)
    try:
        cpus = ask_view(root, "cpus", timeout_s=wait)
    except DaemonNotRunning:
        return None
    except NotAllowed as e:
        return Overlay(notes=(e.message("topology"),))
    except StatusError as e:
        notes.append(f"no CPU pools: {e.message}")
    else:
        sources.append(cpus["source"])
        pressure = cpus.get("pool_pressure")
        if pressure is None:
            notes.append("no pool pressure: the daemon's pressure engine is off ([pressure] enabled)")
        pools, allocs = cpu_marks({k: CPUSet.parse(v) for k, v in (cpus["pools"] or {}).items()},
                                  cpus["allocations"], pressure)
    try:
        res = ask_view(root, "resources", timeout_s=wait)
        devices = device_marks(res)
        sources.append(res["source"])
    except DaemonNotRunning:
        return None
    except StatusError as e:
        notes.append(f"no device resources: {e.message}")
    memory, why = _memory(root, wait)
    if why is not None:
        notes.append(why)
    else:
        sources.append("memory manager (live)")
    return Overlay(pools, allocs, devices, "; ".join(sources), tuple(notes), memory)


def from_daemon(config: str | None, root_dir: str | None, *, metrics: bool = True, timeout: float = 0.5) -> Overlay:
    """The running daemon's state under the root dir; with no daemon answering, what its files
    under the root dir hold (the CPU policy's and the device host's checkpoints), said so."""
    from agent.config import ConfigError, load
    from agent.status.offline import (
        StateUnreadable,
        device_checkpoint_path,
        device_view,
        read_cpu_checkpoint,
        read_device_checkpoint,
    )

    try:
        cfg = load(config)
    except ConfigError as e:
        return Overlay(notes=(f"config: {e}",))
    root = Path(root_dir or cfg[DAEMON_SECTION].root_dir)
    live = _running(root, timeout)
    if live is not None:
        return live
    notes: list[str] = [f"no running daemon answers under {root}: drawn from its files"]
    pools: tuple[PoolMark, ...] = ()
    allocs: tuple[AllocationMark, ...] = ()
    devices: tuple[DeviceMark, ...] = ()
    sources = []

    try:
        cp = read_cpu_checkpoint(root)
        sources.append(cp.source)
        pressure = _pressure(cfg[DAEMON_SECTION].metrics_address, timeout) if metrics else None
        if pressure is None and metrics:
            notes.append(f"no pool pressure: the daemon's /metrics at {cfg[DAEMON_SECTION].metrics_address} did not answer")
        pools = tuple(
            PoolMark(name, cpus, (pressure or {}).get(name))
            for name, cpus in sorted(cp.pools.items())
            if name != _DEDICATED and cpus
        )
        allocs = tuple(
            AllocationMark(f"{a.namespace}/{a.pod}" if a.pod else a.pod_uid, a.container, a.cpus, _DEDICATED)
            for a in cp.allocations
            if a.cpus and (a.qos_level == "dedicated_cores" or a.pool == _DEDICATED)
        )
    except StateUnreadable as e:
        notes.append(f"no CPU pools: {e}")

    try:
        path = device_checkpoint_path(cfg, root)
        devices = device_marks(device_view(read_device_checkpoint(path)))
        sources.append(f"checkpoint {path}")
    except FileNotFoundError:
        notes.append(f"no device resources: no device-manager checkpoint under {root}")
    except (OSError, ValueError, KeyError, StateUnreadable) as e:
        notes.append(f"no device resources: {e}")
    notes.append("no memory per node: no running daemon answers on its status socket")
    return Overlay(pools, allocs, devices, "; ".join(sources), tuple(notes))
