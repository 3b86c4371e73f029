"""The topology as a stable JSON document (``hwagent topology --format json``).

Scripts and other tools read this, so its shape is a contract: CPU and node
sets are kernel list-format strings ("0-3,8"), ids are integers, sizes are
bytes, and ``format`` names the version. ``from_document`` rebuilds the exact
``Topology`` so the document can also feed tests and offline analysis.

Version 2 (``hwagent-topology/2``, described with its JSON schema in
docs/topology.md) adds what the model learnt to say: the group levels
(``levels``, ``groups``: dies, clusters, compute units), each package's
logical number beside the kernel's id, the core count per package, and the
NUMA nodes grouped by distance. Every version-1 key keeps its meaning;
``from_document`` reads both.
"""

from __future__ import annotations

from agent.cpuset import CPUSet
from agent.topology.distance import distance_levels
from agent.topology.model import CPU, GROUP_KINDS, Cache, NUMANode, Topology

#: annotations only: :mod:`typing` would cost ``hwagent topology --format json``
#: about 1.5 ms; mypy takes the name ``TYPE_CHECKING`` as true
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["FORMAT", "FORMATS", "from_document", "levels", "to_document"]

FORMAT = "hwagent-topology/2"
#: versions ``from_document`` reads
FORMATS = ("hwagent-topology/1", FORMAT)


def levels(topo: Topology) -> list[str]:
    """The levels this machine has, outermost first: what a tree of it nests.

    ``package`` and ``core``/``pu`` always; ``die``, ``cluster`` and
    ``compute_unit`` where a group of that kind exists; ``llc`` where caches
    were read. The LLC sits between die and cluster: on every snapshot an L3
    holds whole clusters and compute units, and dies hold whole L3s.
    """
    kinds = {g.kind for g in topo.groups}
    out = ["package"]
    out += ["die"] if "die" in kinds else []
    out += ["llc"] if topo.last_level_caches else []
    out += [k for k in GROUP_KINDS[1:] if k in kinds]
    return out + ["core", "pu"]


def _opt_set(s: CPUSet | None) -> str | None:
    return None if s is None else str(s)


def to_document(topo: Topology) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "source": topo.source,
        "cpus": str(topo.online),
        "possible": str(topo.possible),
        "present": str(topo.present),
        "offline": str(topo.offline),
        "isolated": str(topo.isolated),
        "allowed_cpus": _opt_set(topo.allowed_cpus),
        "allowed_mems": _opt_set(topo.allowed_mems),
        "levels": levels(topo),
        "packages": [
            {
                "id": p,
                "logical": topo.logical_package[p],
                "cpus": str(topo.cpus_of_package(p)),
                "cores": len(topo.cores_of_package(p)),
                "dies": sorted({k.die_id for k in topo.cores_of_package(p)}),
                "numa_nodes": list(topo.numa_nodes_of_package(p)),
            }
            for p in topo.package_ids
        ],
        "groups": [{"kind": g.kind, "package": g.package_id, "id": g.id, "cpus": str(g.cpus)} for g in topo.groups],
        "cores": [
            {"package": k.package_id, "die": k.die_id, "core_id": k.core_id, "cpus": str(k.cpus)}
            for k in topo.cores
        ],
        "logical_cpus": [
            {
                "id": c.id,
                "package": c.package_id,
                "die": c.die_id,
                "cluster": c.cluster_id,
                "core_id": c.core_id,
                "numa_node": c.numa_node,
                "thread_siblings": str(c.thread_siblings),
            }
            for c in topo.cpus
        ],
        "numa_nodes": [
            {
                "id": n.id,
                "cpus": str(n.cpus),
                "memory_bytes": n.memory_bytes,
                "memory_only": n.memory_only,
                # JSON object keys are strings; values are the kernel's distances
                "distances": {str(k): v for k, v in sorted(n.distances.items())},
            }
            for n in topo.numa_nodes
        ],
        "numa_distance_groups": [
            {"distance": lv.distance, "groups": [str(g) for g in lv.groups]} for lv in distance_levels(topo)
        ],
        "caches": [
            {
                "level": c.level,
                "type": c.type,
                "size_bytes": c.size_bytes,
                "cpus": str(c.cpus),
                "id": c.id,
                "line_size": c.line_size,
                "ways": c.ways,
            }
            for c in topo.caches
        ],
        "warnings": list(topo.warnings),
    }


def from_document(doc: dict[str, Any]) -> Topology:
    """Inverse of ``to_document``; raises ValueError on another format."""
    if doc.get("format") not in FORMATS:
        raise ValueError(f"not a {' or '.join(FORMATS)} document (format={doc.get('format')!r})")

    def opt(key: str) -> CPUSet | None:
        v = doc.get(key)
        return None if v is None else CPUSet.parse(v)

    return Topology(
        cpus=tuple(
            CPU(
                id=c["id"],
                package_id=c["package"],
                core_id=c["core_id"],
                die_id=c["die"],
                cluster_id=c["cluster"],
                numa_node=c["numa_node"],
                thread_siblings=CPUSet.parse(c["thread_siblings"]),
            )
            for c in doc["logical_cpus"]
        ),
        numa_nodes=tuple(
            NUMANode(
                id=n["id"],
                cpus=CPUSet.parse(n["cpus"]),
                memory_bytes=n["memory_bytes"],
                distances={int(k): v for k, v in n["distances"].items()},
            )
            for n in doc["numa_nodes"]
        ),
        caches=tuple(
            Cache(
                level=c["level"],
                type=c["type"],
                size_bytes=c["size_bytes"],
                cpus=CPUSet.parse(c["cpus"]),
                id=c["id"],
                line_size=c["line_size"],
                ways=c["ways"],
            )
            for c in doc["caches"]
        ),
        possible=CPUSet.parse(doc["possible"]),
        present=CPUSet.parse(doc["present"]),
        offline=CPUSet.parse(doc["offline"]),
        isolated=CPUSet.parse(doc["isolated"]),
        allowed_cpus=opt("allowed_cpus"),
        allowed_mems=opt("allowed_mems"),
        warnings=tuple(doc["warnings"]),
        source=doc["source"],
    )
