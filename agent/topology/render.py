"""The topology as a tree a person reads (``hwagent topology``).

Package -> die -> last-level-cache group -> core -> CPUs, then NUMA nodes with
their memory, the nodes grouped by distance, the distance matrix and whatever
the reader warned about. Packages carry their logical number (0, 1, ...) with
the kernel's id in brackets where it differs (arm firmware ids like 36, 8442). Levels
that add nothing (one die per package, no cache information) are left out so a
small machine stays a few lines.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.cpuset import CPUSet
from agent.humanbytes import human_bytes
from agent.topology.model import Cache, Core, Topology

__all__ = ["human_bytes", "render_text"]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _tree(lines: list[str], prefix: str, items: list[tuple[str, list[str]]]) -> None:
    """Append items (label, already-rendered child lines) with box-drawing branches."""
    for i, (label, children) in enumerate(items):
        last = i == len(items) - 1
        lines.append(f"{prefix}{'└─ ' if last else '├─ '}{label}")
        cont = prefix + ("   " if last else "│  ")
        lines.extend(cont + child for child in children)


def _core_label(topo: Topology, core: Core, show_cluster: bool) -> str:
    cpus = core.cpus
    label = f"core {core.core_id}: cpu{'s' if len(cpus) > 1 else ''} {cpus}"
    if show_cluster:
        cluster = topo.cpu(core.first_cpu).cluster_id
        if cluster is not None:
            label += f"  cluster {cluster}"
    unit = next((g for g in topo.groups_of_kind("compute_unit") if core.first_cpu in g.cpus), None)
    if unit is not None:
        label += f"  compute unit {unit.cpus}"
    marks = []
    if cpus & topo.isolated:
        marks.append(f"isolated {cpus & topo.isolated}")
    if topo.allowed_cpus is not None and cpus - topo.allowed_cpus:
        marks.append(f"not allowed {cpus - topo.allowed_cpus}")
    if marks:
        label += f"  [{'; '.join(marks)}]"
    return label


def _cache_label(c: Cache, cpus: CPUSet) -> str:
    kind = "" if c.type == "Unified" else f" {c.type.lower()}"
    return f"L{c.level}{kind} {human_bytes(c.size_bytes)}  (cpus {cpus})"


def _cores_tree(topo: Topology, cores: Iterable[Core], show_cluster: bool) -> list[str]:
    """Cores grouped under the last-level cache they share."""
    groups: dict[Cache | None, list[Core]] = {}
    for core in cores:
        groups.setdefault(topo.llc_of(core.first_cpu), []).append(core)
    out: list[str] = []
    items: list[tuple[str, list[str]]] = []
    for cache, members in groups.items():
        core_items: list[tuple[str, list[str]]] = [(_core_label(topo, k, show_cluster), []) for k in members]
        if cache is None:
            _tree(out, "", core_items)
            continue
        children: list[str] = []
        _tree(children, "", core_items)
        items.append((_cache_label(cache, cache.cpus & topo.online), children))
    _tree(out, "", items)
    return out


#: beyond this many nodes a matrix no longer fits a terminal; JSON has it all
MAX_MATRIX_NODES = 16


def _distance_lines(topo: Topology) -> list[str]:
    ids = [n.id for n in topo.numa_nodes]
    if len(ids) < 2 or not any(n.distances for n in topo.numa_nodes):
        return []
    if len(ids) > MAX_MATRIX_NODES:
        values = sorted({d for n in topo.numa_nodes for d in n.distances.values()})
        return ["", f"Distances: {len(ids)} nodes, values {', '.join(map(str, values))} (matrix in --format json)"]
    width = max(4, *(len(str(i)) + 1 for i in ids))
    out = ["", "Distances:", "  " + " " * width + "".join(f"{i:>{width}}" for i in ids)]
    for a in ids:
        cells = (topo.distance(a, b) for b in ids)
        out.append(f"  {a:>{width}}" + "".join(f"{'-' if d is None else d:>{width}}" for d in cells))
    return out


def render_text(topo: Topology) -> str:
    lines: list[str] = []
    memory = sum(n.memory_bytes or 0 for n in topo.numa_nodes)
    lines.append(
        f"{_plural(len(topo.cpus), 'CPU')} online ({topo.online}), "
        f"{_plural(len(topo.package_ids), 'package')}, {_plural(len(topo.cores), 'core')}, "
        f"{topo.threads_per_core} thread{'s' if topo.threads_per_core != 1 else ''}/core, "
        f"{_plural(len(topo.numa_nodes), 'NUMA node')}, {human_bytes(memory)} memory"
    )
    facts = [f"source {topo.source}"] if topo.source else []
    if topo.allowed_cpus is not None:
        facts.append(f"this process may use cpus {topo.allowed_cpus & topo.online}")
    if topo.allowed_mems is not None:
        facts.append(f"memory nodes {topo.allowed_mems}")
    if topo.offline:
        facts.append(f"offline cpus {topo.offline}")
    if topo.isolated:
        facts.append(f"isolated cpus {topo.isolated}")
    if facts:
        lines.append("; ".join(facts))
    lines.append("")

    from agent.topology.distance import distance_levels

    # some package has several dies: more (package, die) pairs than packages (one pass, not one per package)
    multi_die = len({(c.package_id, c.die_id) for c in topo.cpus}) > len(topo.package_ids)
    for p in topo.package_ids:
        cores = topo.cores_of_package(p)
        # clusters are worth a mention only where several cores share one (arm);
        # on x86 every core is its own cluster
        show_cluster = any(g.package_id == p for g in topo.groups_of_kind("cluster"))
        nodes = topo.numa_nodes_of_package(p)
        logical = topo.logical_package[p]
        label = f"package {logical}{f' [{p}]' if logical != p else ''}: {_plural(len(cores), 'core')}, cpus {topo.cpus_of_package(p)}"
        if nodes:
            label += f"  (NUMA node{'s' if len(nodes) > 1 else ''} {CPUSet(nodes)})"
        if multi_die:
            dies = sorted({k.die_id for k in cores})
            children: list[str] = []
            _tree(
                children,
                "",
                [(f"die {d}", _cores_tree(topo, [k for k in cores if k.die_id == d], show_cluster)) for d in dies],
            )
        else:
            children = _cores_tree(topo, cores, show_cluster)
        lines.append(label)
        lines.extend("  " + child for child in children)

    lines.append("")
    lines.append("NUMA nodes:")
    for n in topo.numa_nodes:
        where = "memory only" if n.memory_only else f"cpus {n.cpus & topo.online if n.cpus & topo.online else n.cpus}"
        lines.append(f"  node {n.id}: {human_bytes(n.memory_bytes)}, {where}")

    levels = distance_levels(topo)
    if levels:
        lines.append("")
        lines.append("NUMA nodes by distance (nodes at most that far from each other, nearest first):")
        for lv in levels:
            lines.append(f"  within {lv.distance}: " + "  ".join(f"[{g}]" for g in lv.groups))
    lines.extend(_distance_lines(topo))

    if topo.warnings:
        lines.append("")
        lines.append(f"Warnings ({len(topo.warnings)}):")
        lines.extend(f"  - {w}" for w in topo.warnings)
    return "\n".join(lines) + "\n"
