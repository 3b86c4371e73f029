"""What a daemon left under its root dir, read without changing a file.

The read side's offline half: when no daemon answers on the status socket,
`hwagent cpus`, `hwagent resources` and `hwagent topology --live` read the CPU
policy's checkpoint and the device host's snapshot plus journal through these
functions, and the live status view shapes the device host's state with the
same ``device_view``, so the JSON of a live daemon and of its files is one
shape. Kept below the command line (agent.commands imports this, never the
reverse): a problem is a ``StateUnreadable`` the caller words for its user.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.devicemanager.config import DEVICEMANAGER_SECTION

if TYPE_CHECKING:  # the device manager pulls in grpc: loaded only when a file is read
    from agent.config import Config
    from agent.cpu.view import Allocation
    from agent.cpuset import CPUSet
    from agent.contracts.devices import CheckpointData

__all__ = ["StateUnreadable", "CPUCheckpoint", "read_cpu_checkpoint", "device_checkpoint_path",
           "read_device_checkpoint", "device_view"]


class StateUnreadable(Exception):
    """The file is missing, unreadable or corrupt; the message names it and what to check."""


@dataclass(frozen=True)
class CPUCheckpoint:
    """The CPU policy's pools and allocations as its checkpoint holds them."""

    pools: dict[str, CPUSet]
    allocations: list[Allocation]
    source: str


def read_cpu_checkpoint(root: Path) -> CPUCheckpoint:
    """The CPU policy's checkpoint under ``root`` (read-only: the daemon may be writing it)."""
    from agent.cpu.checkpoint import CheckpointError, CheckpointStore
    from agent.cpu.view import from_policy
    from agent.rootpaths import cpu_dir

    store = CheckpointStore(cpu_dir(root))
    try:
        st = store.load(read_only=True)
    except CheckpointError as e:
        raise StateUnreadable(str(e)) from None
    except OSError as e:
        raise StateUnreadable(f"cannot read {store.path}: {e.strerror}") from None
    if st is None:
        raise StateUnreadable(f"no cpu checkpoint at {store.path} (is --root-dir right? has hwagent run?)")
    allocs = [from_policy(a) for a in st.containers()]
    return CPUCheckpoint(dict(st.pools), allocs, f"checkpoint {store.path}")


def device_checkpoint_path(config: Config, root: Path) -> Path:
    """Where the device host of ``config`` keeps its snapshot under ``root``."""
    from agent.rootpaths import device_host

    cfg = config[DEVICEMANAGER_SECTION]
    return device_host(root, plugins_dir=cfg.device_plugins_dir, checkpoint_name=cfg.checkpoint_name).checkpoint


def read_device_checkpoint(path: Path) -> CheckpointData:
    """The device host's snapshot with its journal replayed, as the daemon last made it durable.

    ``FileNotFoundError`` when there is no snapshot (the host has never run, or
    runs in kubelet mode); any other problem is a ``StateUnreadable``.
    """
    from agent.devicemanager.checkpoint import open_journal
    from agent.journal import JournalCorrupt

    try:
        path.stat()
    except FileNotFoundError:
        raise  # nothing there, which each caller says in its own words
    except OSError as e:
        raise StateUnreadable(f"cannot read {path}: {e.strerror}") from None
    journal = open_journal(path)
    try:
        return journal.recover(read_only=True).state.data()
    except JournalCorrupt as e:
        raise StateUnreadable(f"corrupt checkpoint: {e}") from None
    except OSError as e:
        raise StateUnreadable(f"cannot read {path}: {e.strerror}") from None
    finally:
        journal.close_sync()


def device_view(data: CheckpointData) -> dict[str, Any]:
    """The device host's state as `hwagent resources --format json` prints it."""
    endpoints: dict[str, list[dict[str, Any]]] = {}
    for e in data.endpoints:
        endpoints.setdefault(e.resource, []).append(
            {"socket": e.socket, "state": e.state, "stop_time": e.stop_time}
        )
    allocated: dict[str, set[str]] = {}
    for a in data.allocations:
        allocated.setdefault(a.resource, set()).update(a.device_ids)
    resources = {}
    for r in sorted(set(data.devices) | set(endpoints) | set(allocated)):
        devs = data.devices.get(r, ())
        resources[r] = {
            "capacity": len(devs),
            "allocatable": sum(1 for d in devs if d.healthy),
            "allocated": len(allocated.get(r, ())),
            "endpoints": endpoints.get(r, []),
            "devices": [
                {"id": d.id, "health": "Healthy" if d.healthy else "Unhealthy", "numa": list(d.numa),
                 "allocated": d.id in allocated.get(r, ())}
                for d in sorted(devs, key=lambda d: d.id)
            ],
        }
    return {
        "resources": resources,
        "deleted_resources": sorted(data.deleted),
        "allocations": [
            {"pod_uid": a.pod_uid, "namespace": a.pod_namespace, "pod": a.pod_name,
             "container": a.container_name, "container_type": a.container_type,
             "resource": a.resource, "devices": list(a.device_ids), "numa": list(a.numa_nodes())}
            for a in sorted(data.allocations, key=lambda a: (a.pod_namespace, a.pod_name, a.pod_uid,
                                                              a.container_name, a.resource))
        ],
    }
