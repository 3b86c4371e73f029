"""What ``hwagent cpus`` shows: pools and allocations per NUMA node (pure)."""

from __future__ import annotations

from agent.cpuset import CPUSet

#: typing and collections.abc are not imported at run time: `hwagent cpus` renders the daemon's view
#: without them (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

__all__ = ["Allocation", "from_policy", "summarize", "render_table"]


class Allocation:
    """One container's cpuset, from the checkpoint or the gRPC API. ``pool``: the pool the views
    name (``agent.cpu.qos.shown_pool``); ``ramp_up``: a shared container not yet in it."""

    __slots__ = ("pod_uid", "namespace", "pod", "container", "qos_level", "pool", "cpus", "ramp_up")

    def __init__(
        self, pod_uid: str, namespace: str, pod: str, container: str, qos_level: str, pool: str, cpus: CPUSet,
        ramp_up: bool = False,
    ) -> None:
        self.pod_uid, self.namespace, self.pod, self.container = pod_uid, namespace, pod, container
        self.qos_level, self.pool, self.cpus, self.ramp_up = qos_level, pool, cpus, ramp_up


def from_policy(a: Any) -> Allocation:
    """The view of one of the CPU policy's ``AllocationInfo``: the pool named as
    ``agent.cpu.qos.shown_pool`` says (a shared container in ramp-up: the pool it joins)."""
    from agent.cpu.qos import shown_pool

    pool, joining = shown_pool(a.qos_level, a.owner_pool_name, a.ramp_up, a.annotations)
    return Allocation(a.pod_uid, a.pod_namespace, a.pod_name, a.container_name, a.qos_level, pool, a.cpuset, joining)


def summarize(
    numa_cpus: Mapping[int, CPUSet],
    pools: Mapping[str, CPUSet] | None,
    allocations: Iterable[Allocation],
    source: str,
) -> dict[str, Any]:
    allocs = sorted(allocations, key=lambda a: (a.namespace, a.pod, a.pod_uid, a.container))
    nodes = []
    for n, cpus in sorted(numa_cpus.items()):
        pool_part = {p: str(c & cpus) for p, c in sorted((pools or {}).items()) if c & cpus}
        conts = [
            {"pod_uid": a.pod_uid, "container": a.container, "qos_level": a.qos_level, "cpus": str(a.cpus & cpus)}
            for a in allocs
            if a.cpus & cpus
        ]
        used = CPUSet.union_all(a.cpus & cpus for a in allocs)
        nodes.append({"node": n, "cpus": str(cpus), "pools": pool_part, "containers": conts,
                      "cpus_without_container": str(cpus - used)})  # fmt: skip
    return {
        "source": source,
        "pools": None if pools is None else {p: str(c) for p, c in sorted(pools.items())},
        "numa_nodes": nodes,
        "allocations": [
            {
                "pod_uid": a.pod_uid,
                "namespace": a.namespace,
                "pod": a.pod,
                "container": a.container,
                "qos_level": a.qos_level,
                "pool": a.pool,
                "ramp_up": a.ramp_up,
                "cpus": str(a.cpus),
                "numa_nodes": [n for n, c in sorted(numa_cpus.items()) if a.cpus & c],
            }
            for a in allocs
        ],
    }


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def render_table(s: dict[str, Any]) -> str:
    out = [f"source: {s['source']}", ""]
    rows = [["NUMA", "CPUS", "POOLS", "CONTAINERS", "NO CONTAINER"]]
    for n in s["numa_nodes"]:
        pools = " ".join(f"{p}={c}" for p, c in n["pools"].items()) if s["pools"] is not None else "n/a"
        rows.append([str(n["node"]), n["cpus"], pools or "-", str(len(n["containers"])), n["cpus_without_container"] or "-"])
    out.append(_table(rows))
    out.append("")
    if not s["allocations"]:
        out.append("no allocations")
        return "\n".join(out)
    rows = [["NAMESPACE/POD", "CONTAINER", "QOS", "POOL", "CPUS", "NUMA"]]
    for a in s["allocations"]:
        pod = f"{a['namespace']}/{a['pod']}" if a["pod"] else a["pod_uid"]
        pool = (a["pool"] or "-") + (" (ramp-up)" if a.get("ramp_up") else "")
        rows.append([pod, a["container"], a["qos_level"], pool, a["cpus"],
                     ",".join(map(str, a["numa_nodes"]))])  # fmt: skip
    out.append(_table(rows))
    return "\n".join(out)
