"""The [memory] config section: the memory manager's policy and reservations.

Reservations follow the kubelet's ``--reserved-memory`` (per NUMA node, in its
own syntax, ``"0:memory=1Gi,hugepages-2Mi=64Mi"``) and its rule that the
per-node ``memory`` must add up to the node's system reservation
(kube-reserved + system-reserved + eviction-hard there; ``system_reserved_memory``
here), so that the per-node and the node-level views of allocatable agree.
``system_reserved_hugepages`` is hwagent's addition: a node-level hugepage
reservation for the system, split over the NUMA nodes that have the page size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from agent.config import SectionKey
from agent.contracts.memory import HUGEPAGES_PREFIX, MEMORY_RESOURCE
from agent.quantity import QuantityError, parse_quantity, to_units

__all__ = ["MEMORY_SECTION", "MemoryConfig", "parse_reserved", "reservation_problem"]

_RESOURCE = re.compile(r"^(memory|hugepages-[0-9]+[KMGT]i)$")


@dataclass(frozen=True)
class MemoryConfig:
    enabled: bool = True
    #: "static": the kubelet's static policy (memory and hugepages per NUMA node);
    #: "none": no placement, no hints (every pod runs on every memory node)
    policy: Literal["static", "none"] = "static"
    #: per NUMA node, the kubelet's --reserved-memory syntax: ["0:memory=1Gi,hugepages-2Mi=64Mi", ...]
    reserved_memory: list[str] = field(default_factory=list)
    #: what the per-node ``memory`` reservations must add up to ("" = whatever they add up to is it)
    system_reserved_memory: str = ""
    #: node-level hugepage reservation for the system: {"hugepages-2Mi" = "64Mi"}, split over the nodes
    system_reserved_hugepages: dict[str, str] = field(default_factory=dict)
    #: start empty (keeping the bad file aside) when the state file is corrupt
    accept_state_loss: bool = False
    #: how often the per-node truth is re-read (memory hot-plug, hugepage pool changes)
    rescan_interval_s: float = 10.0
    #: pods absent from the active-pods source this long are released (as [cpu] residual_cleanup_s)
    residual_cleanup_s: float = 300.0

    def validate(self) -> None:
        reserved = parse_reserved(self.reserved_memory)  # raises ValueError naming the bad entry
        for name, q in self.system_reserved_hugepages.items():
            if not name.startswith(HUGEPAGES_PREFIX) or not _RESOURCE.match(name):
                raise ValueError(f"system_reserved_hugepages: {name!r} is not a hugepages-<size> resource")
            _bytes(q, f"system_reserved_hugepages.{name}")
        if self.system_reserved_memory:
            _bytes(self.system_reserved_memory, "system_reserved_memory")
        why = reservation_problem(self, reserved)
        if why:
            raise ValueError(why)
        if self.rescan_interval_s <= 0:
            raise ValueError("rescan_interval_s must be > 0")
        if self.residual_cleanup_s < 0:
            raise ValueError("residual_cleanup_s must be >= 0")

    def reserved(self) -> dict[int, dict[str, int]]:
        return parse_reserved(self.reserved_memory)

    def system_hugepages(self) -> dict[str, int]:
        return {k: _bytes(v, f"system_reserved_hugepages.{k}") for k, v in self.system_reserved_hugepages.items()}


def _bytes(q: str, where: str) -> int:
    try:
        v = parse_quantity(q)
    except QuantityError as e:
        raise ValueError(f"{where}: {e}") from None
    if v < 0:
        raise ValueError(f"{where}: must not be negative, got {q}")
    return to_units(v)


def parse_reserved(entries: list[str]) -> dict[int, dict[str, int]]:
    """``["0:memory=1Gi,hugepages-2Mi=64Mi"]`` -> {0: {"memory": 1073741824, ...}}; ValueError names the entry."""
    out: dict[int, dict[str, int]] = {}
    for entry in entries:
        where = f"reserved_memory {entry!r}"
        node_s, sep, rest = entry.partition(":")
        if not sep or not node_s.strip().isdigit() or not rest.strip():
            raise ValueError(f"{where}: write <numa node>:<resource>=<quantity>[,...], e.g. 0:memory=1Gi")
        node = int(node_s)
        table = out.setdefault(node, {})
        for item in rest.split(","):
            name, eq, q = item.strip().partition("=")
            if not eq or not _RESOURCE.match(name):
                raise ValueError(f"{where}: {item.strip()!r} is not memory=<q> or hugepages-<size>=<q>")
            if name in table:
                raise ValueError(f"{where}: {name} of node {node} given twice")
            table[name] = _bytes(q, where)
    return out


def reservation_problem(cfg: MemoryConfig, reserved: dict[int, dict[str, int]]) -> str | None:
    """Why the per-node memory reservations do not add up to ``system_reserved_memory``
    (the kubelet refuses to start on the same mismatch); None when they do."""
    if not cfg.system_reserved_memory:
        return None
    want = _bytes(cfg.system_reserved_memory, "system_reserved_memory")
    per_node = {n: t.get(MEMORY_RESOURCE, 0) for n, t in sorted(reserved.items())}
    got = sum(per_node.values())
    if got == want:
        return None
    parts = ", ".join(f"node {n}: {v}" for n, v in per_node.items()) or "none given"
    return (f"reserved_memory: the per-node memory reservations add up to {got} bytes ({parts}) but "
            f"system_reserved_memory is {want} bytes; they must be equal (as the kubelet's --reserved-memory "
            f"and its system reservation): change one of them")


#: ``config[MEMORY_SECTION]``, the [memory] section
MEMORY_SECTION: SectionKey[MemoryConfig] = SectionKey("memory", MemoryConfig)
