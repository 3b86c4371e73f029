"""What is free per NUMA node, written as a person reads it (pure).

A refusal ends with what the machine has free, so the reader can tell what to
ask for instead. ``node 0: 1 CPU, 23.5 GiB memory, 0 × 2 MiB pages`` reads at a
glance; the earlier ``cpu 0=1; memory 0=24683772Ki`` read as "CPU 0 = 1" and
made the reader convert kibibytes (issue 37 item 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.memory.sysfs import page_size_of
from agent.memory.words import memory_phrase

__all__ = ["NodeFree", "count_phrase", "free_line"]


def count_phrase(n: int, what: str) -> str:
    """``1 CPU``, ``3 CPUs``, ``0 example.com/gpu``: a count with its noun (plural for
    words; a resource name is left as it is)."""
    if "/" in what or "." in what:
        return f"{n} {what}"
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


@dataclass(frozen=True)
class NodeFree:
    """What one NUMA node has free: CPUs (None when no CPU policy runs), memory per resource
    in bytes, devices per resource name."""

    cpus: int | None = None
    memory: Mapping[str, int] = field(default_factory=dict)
    devices: Mapping[str, int] = field(default_factory=dict)


def _node_parts(f: NodeFree) -> list[str]:
    parts = []
    if f.cpus is not None:
        parts.append(count_phrase(f.cpus, "CPU"))
    parts.extend(memory_phrase(r, b) for r, b in sorted(f.memory.items(), key=lambda kv: _memory_order(kv[0])))
    parts.extend(count_phrase(k, r) for r, k in sorted(f.devices.items()))
    return parts


def _memory_order(resource: str) -> tuple[int, int]:
    page = page_size_of(resource)
    return (0, 0) if page is None else (1, page)


def free_line(nodes: Mapping[int, NodeFree], unaligned: Mapping[str, int] | None = None,
              cpus_note: str = "") -> str:
    """``free per NUMA node: node 0: 1 CPU, 23.5 GiB memory, 0 × 2 MiB pages; node 1: ...``.

    ``unaligned``: free devices on no NUMA node, per resource (said after the nodes);
    ``cpus_note``: a word on what the CPUs count (e.g. that they are free for dedicated pods
    only), put in brackets after the heading."""
    head = "free per NUMA node" + (f" ({cpus_note})" if cpus_note else "")
    parts = [f"node {n}: {', '.join(p)}" for n, f in sorted(nodes.items()) if (p := _node_parts(f))]
    extra = [count_phrase(k, r) for r, k in sorted((unaligned or {}).items()) if k]
    if extra:
        parts.append("on no NUMA node: " + ", ".join(extra))
    return f"{head}: " + ("; ".join(parts) if parts else "unknown")
