"""The memory manager's live view (``hwagent memory``), as a plain dict and as a table.

Per NUMA node and memory resource (``memory``, ``hugepages-<size>``): total,
reserved for the system, allocatable, allocated and free bytes, each read from
the manager when the daemon answers (``MemoryAllocations.nodes``); and each
placed container's blocks with the nodes they come from. The manager keys
containers by pod UID; the pod's namespace and name are joined from whoever
else knows the pod (the CPU policy, the kubelet's pod directory), blank when
no one does.
"""

from __future__ import annotations

from agent.humanbytes import human_bytes

#: the contracts, typing and collections.abc are not imported at run time: `hwagent memory` renders
#: this view without them (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from agent.contracts.memory import MemoryAllocations, MemoryBlock

__all__ = ["memory_view", "render_memory", "block_json"]

COLUMNS = ("total", "reserved", "allocatable", "allocated", "free")


def block_json(b: MemoryBlock) -> dict[str, Any]:
    """One block as every JSON view shows it (describe, hwagent memory)."""
    return {"resource": b.resource, "size": b.size, "numa_nodes": list(b.numa_nodes),
            "per_node": {str(n): v for n, v in sorted(b.split().items())}}


def memory_view(memory: MemoryAllocations, names: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """``names``: pod UID -> (namespace, name), as far as the daemon knows them."""
    nodes: dict[int, dict[str, dict[str, int]]] = {}
    for n in memory.nodes():
        nodes.setdefault(n.node, {})[n.resource] = {
            "total": n.total, "reserved": n.system_reserved, "allocatable": n.allocatable,
            "allocated": n.allocated, "free": n.free,
        }
    containers = []
    for (uid, cname), blocks in sorted(memory.all_blocks().items()):
        if not blocks:
            continue
        ns, pod = names.get(uid, ("", ""))
        containers.append({"pod_uid": uid, "namespace": ns, "pod": pod, "container": cname,
                           "blocks": [block_json(b) for b in blocks]})
    return {
        "source": "memory manager (live)",
        "nodes": [{"node": n, "resources": res} for n, res in sorted(nodes.items())],
        "containers": containers,
    }


def _size(n: int) -> str:
    return "0" if n == 0 else human_bytes(n).replace(" ", "")


def render_memory(view: Mapping[str, Any]) -> str:
    rows = [("NUMA", "RESOURCE", *(c.upper() for c in COLUMNS))]
    for node in view["nodes"]:
        for resource, acc in sorted(node["resources"].items()):
            rows.append((str(node["node"]), resource, *(_size(acc[c]) for c in COLUMNS)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.append("")
    if not view["containers"]:
        lines.append("containers: none placed by the memory manager")
    else:
        lines.append("containers:")
        for c in view["containers"]:
            who = f"{c['namespace']}/{c['pod']}" if c["pod"] else c["pod_uid"]
            parts = []
            for b in c["blocks"]:
                split = ", ".join(f"{n}={_size(v)}" for n, v in b["per_node"].items())
                where = f"NUMA {','.join(str(n) for n in b['numa_nodes'])}" + (
                    f" ({split})" if len(b["numa_nodes"]) > 1 and split else "")
                parts.append(f"{b['resource']} {_size(b['size'])} on {where}")
            lines.append(f"  {who} {c['container']}: " + "; ".join(parts))
    lines.append(f"source: {view['source']}")
    return "\n".join(lines)
