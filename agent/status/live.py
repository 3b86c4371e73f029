"""The overlay of a running (or stopped) daemon, read the way `hwagent cpus` / `resources` read it.

Thin adapter: the CPU policy's checkpoint gives pools and dedicated
allocations, the device manager's snapshot and journal resources, health and
holders (both through ``agent.status.offline``, the readers those commands
use, so a change to those files is followed in one place), and the daemon's
``/metrics`` the pools' run-queue
pressure when it answers within a short timeout, and the running daemon's
memory manager (``status.sock``, the view ``hwagent memory`` shows) each
pod's memory per NUMA node. Whatever is missing is left out and said in
``Overlay.notes``; nothing here raises for a daemon that is not there.
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from agent.daemonconfig import DAEMON_SECTION
from agent.topology.overlay import AllocationMark, DeviceMark, MemoryMark, Overlay, PoolMark

__all__ = ["from_daemon", "parse_pool_pressure", "memory_marks"]

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
    from agent.status.client import DaemonNotRunning, get_view

    try:
        return memory_marks(get_view(root, "memory", timeout_s=timeout)), None
    except DaemonNotRunning:
        return (), "no memory per node: no running daemon answers on its status socket"
    except Exception as e:  # noqa: BLE001 - a grpc.RpcError (no memory manager) or a view we cannot read
        details = getattr(e, "details", None)
        return (), f"no memory per node: {details() if callable(details) else e}"


def from_daemon(config: str | None, root_dir: str | None, *, metrics: bool = True, timeout: float = 0.5) -> Overlay:
    from agent.config import ConfigError, load
    from agent.status.offline import (
        StateUnreadable,
        device_checkpoint_path,
        device_view,
        read_cpu_checkpoint,
        read_device_checkpoint,
    )

    notes: list[str] = []
    try:
        cfg = load(config)
    except ConfigError as e:
        return Overlay(notes=(f"config: {e}",))
    root = Path(root_dir or cfg[DAEMON_SECTION].root_dir)
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
        view = device_view(read_device_checkpoint(path))
        sources.append(f"checkpoint {path}")
        holder: dict[tuple[str, str], str] = {}
        for a in view["allocations"]:
            who = f"{a['namespace']}/{a['pod']}" if a["pod"] else a["pod_uid"]
            for dev in a["devices"]:
                holder[(a["resource"], dev)] = who
        devices = tuple(
            DeviceMark(d["id"], name, d["health"] == "Healthy", tuple(d["numa"]), holder.get((name, d["id"])))
            for name, r in view["resources"].items()
            for d in r["devices"]
        )
    except FileNotFoundError:
        notes.append(f"no device resources: no device-manager checkpoint under {root}")
    except (OSError, ValueError, KeyError, StateUnreadable) as e:
        notes.append(f"no device resources: {e}")
    memory, why = _memory(root, max(timeout, 2.0))
    if why is not None:
        notes.append(why)
    else:
        sources.append("memory manager (live)")
    return Overlay(pools, allocs, devices, "; ".join(sources), tuple(notes), memory)

