"""Read per-NUMA-node memory truth from a sysfs tree (the live ``/sys`` or a snapshot).

What the memory manager accounts against: each node's ``MemTotal``/``MemFree``
(``devices/system/node/node<N>/meminfo``) and each hugepage pool's
``nr``/``free``/``surplus`` pages (``node<N>/hugepages/hugepages-<kB>kB/``).
Memory-only nodes (CXL, HBM, GPU memory exposed as NUMA) are read like any
other: they have memory and no CPUs, and a pod may be placed on them only
through a group of nodes. A node without a ``meminfo`` is skipped (a snapshot
that lacks it has nothing to say); a tree without ``devices/system/node`` (no
NUMA support) reads as one node 0 from ``/proc/meminfo``-less sysfs: nothing,
which the caller reports.

Reads go through ``agent.fsread`` with paths built from the root, so fixture
trees read exactly like the live machine.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from agent.contracts.memory import HUGEPAGES_PREFIX
from agent.fsread import read_cpulist, read_int, read_optional, rooted

__all__ = ["HugePool", "NodeTruth", "MachineMemory", "read_memory", "hugepage_resource", "page_size_of"]

_KB = re.compile(r"^Node\s+\d+\s+(MemTotal|MemFree):\s+(\d+)\s*kB", re.MULTILINE)
_POOL = re.compile(r"^hugepages-(\d+)kB$")
_NODE = re.compile(r"^node(\d+)$")
_UNITS = ((1 << 40, "Ti"), (1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki"))


def hugepage_resource(page_size: int) -> str:
    """``hugepages-2Mi`` for 2 MiB pages: the Kubernetes resource name of a page size in bytes."""
    for unit, suffix in _UNITS:
        if page_size % unit == 0:
            return f"{HUGEPAGES_PREFIX}{page_size // unit}{suffix}"
    return f"{HUGEPAGES_PREFIX}{page_size}"


def page_size_of(resource: str) -> int | None:
    """The page size in bytes of ``hugepages-<size>`` (None when the name is not one)."""
    if not resource.startswith(HUGEPAGES_PREFIX):
        return None
    size = resource[len(HUGEPAGES_PREFIX):]
    for unit, suffix in _UNITS:
        if size.endswith(suffix) and size[: -len(suffix)].isdigit():
            return int(size[: -len(suffix)]) * unit
    return int(size) if size.isdigit() else None


@dataclass(frozen=True)
class HugePool:
    """One node's pool of one page size, in pages."""

    page_size: int
    nr: int
    free: int
    surplus: int = 0

    @property
    def total_bytes(self) -> int:
        """What the pool holds for pods: persistent pages only (surplus pages come and go)."""
        return max(0, self.nr - self.surplus) * self.page_size


@dataclass(frozen=True)
class NodeTruth:
    node: int
    mem_total: int
    mem_free: int
    has_cpu: bool
    #: page size in bytes -> pool
    hugepages: dict[int, HugePool] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class MachineMemory:
    nodes: tuple[NodeTruth, ...]
    #: every page size the kernel offers on any node (bytes, ascending)
    page_sizes: tuple[int, ...]
    warnings: tuple[str, ...] = ()

    def node(self, n: int) -> NodeTruth | None:
        return next((x for x in self.nodes if x.node == n), None)

    def resources(self) -> tuple[str, ...]:
        """``memory`` and one ``hugepages-<size>`` per page size the kernel offers."""
        return ("memory",) + tuple(hugepage_resource(s) for s in self.page_sizes)


def read_memory(sysfs_root: str | os.PathLike[str] = "/sys") -> MachineMemory:
    """Every NUMA node's memory and hugepage pools under ``sysfs_root``."""
    base = rooted(os.fspath(sysfs_root), "devices", "system", "node")
    warnings: list[str] = []
    try:
        names = os.listdir(base)
    except OSError as e:
        return MachineMemory((), (), (f"{base}: {e.strerror or e}",))
    ids = sorted(int(m.group(1)) for n in names if (m := _NODE.match(n)))
    with_cpu = read_cpulist(os.path.join(base, "has_cpu"))
    nodes: list[NodeTruth] = []
    sizes: set[int] = set()
    for nid in ids:
        d = os.path.join(base, f"node{nid}")
        text = read_optional(os.path.join(d, "meminfo"))
        if text is None:
            warnings.append(f"node{nid}: no meminfo, left out")
            continue
        kb = {k: int(v) for k, v in _KB.findall(text)}
        if "MemTotal" not in kb:
            warnings.append(f"node{nid}: meminfo has no MemTotal, left out")
            continue
        pools = _read_pools(os.path.join(d, "hugepages"), nid, warnings)
        sizes.update(pools)
        has_cpu = nid in with_cpu if with_cpu is not None else bool((read_optional(os.path.join(d, "cpulist")) or "").strip())
        nodes.append(NodeTruth(nid, kb["MemTotal"] << 10, kb.get("MemFree", 0) << 10, has_cpu, pools))
    return MachineMemory(tuple(nodes), tuple(sorted(sizes)), tuple(warnings))


def _read_pools(d: str, nid: int, warnings: list[str]) -> dict[int, HugePool]:
    try:
        entries = os.listdir(d)
    except OSError:
        return {}
    out: dict[int, HugePool] = {}
    for name in sorted(entries):
        m = _POOL.match(name)
        if m is None:
            continue
        size = int(m.group(1)) << 10
        p = os.path.join(d, name)
        nr = read_int(os.path.join(p, "nr_hugepages"))
        if nr is None:
            warnings.append(f"node{nid}: {name}/nr_hugepages unreadable, pool left out")
            continue
        free = read_int(os.path.join(p, "free_hugepages"))
        surplus = read_int(os.path.join(p, "surplus_hugepages"))
        out[size] = HugePool(size, nr, nr if free is None else free, surplus or 0)
    return out
