"""What hwagent manages, to draw on top of the machine: pools, allocations, devices.

Plain data, read from a running daemon's state by ``agent.status.live`` or
from a JSON file (``hwagent topology --overlay FILE``; the tests' way of
giving the picture a known state). The JSON shape (``hwagent-overlay/1``):

    {"format": "hwagent-overlay/1",
     "pools": [{"name": "share", "cpus": "2-5", "pressure": 0.4}],
     "allocations": [{"pod": "default/web-0", "container": "app", "cpus": "6-7",
                      "pool": "dedicated"}],
     "devices": [{"id": "0000:3b:00.0", "resource": "nvidia.com/gpu",
                  "health": "Healthy", "numa": [0], "pod": "default/train-1"}],
     "memory": [{"pod": "default/web-0", "container": "app", "resource": "hugepages-2Mi",
                 "numa": 0, "size": 67108864}]}

``memory`` is the memory manager's blocks split per NUMA node: one entry per
container, resource and node, ``size`` in bytes.

A pool's kind follows from its name as the CPU policy names them (``reserve``,
``share``, ``reclaim``; any other shared pool is ``named``); ``pressure`` is
the pool's run-queue pressure ratio (``hwagent_pool_cpu_pressure_ratio``),
absent when unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.cpuset import CPUSet, CPUSetError

__all__ = ["OVERLAY_FORMAT", "AllocationMark", "DeviceMark", "MemoryMark", "Overlay", "OverlayError", "PoolMark",
           "pool_kind"]

OVERLAY_FORMAT = "hwagent-overlay/1"

#: the CPU policy's pool names (agent.cpu.qos), not imported: the picture must not load the policy
_KINDS = {"reserve": "reserve", "share": "share", "reclaim": "reclaim"}


class OverlayError(ValueError):
    """An overlay document that does not have the documented shape."""


def pool_kind(name: str) -> str:
    return _KINDS.get(name, "named")


@dataclass(frozen=True)
class PoolMark:
    name: str
    cpus: CPUSet
    pressure: float | None = None

    @property
    def kind(self) -> str:
        return pool_kind(self.name)


@dataclass(frozen=True)
class AllocationMark:
    """A container holding CPUs of its own (dedicated cores)."""

    pod: str  # "namespace/name" (or the pod uid when the name is unknown)
    container: str
    cpus: CPUSet
    pool: str = "dedicated"


@dataclass(frozen=True)
class DeviceMark:
    id: str
    resource: str
    healthy: bool = True
    numa: tuple[int, ...] = ()
    pod: str | None = None  # holder, when allocated


@dataclass(frozen=True)
class MemoryMark:
    """``size`` bytes of a memory resource (``memory``, ``hugepages-2Mi``) a container holds on one NUMA node."""

    pod: str  # "namespace/name" (or the pod uid when the name is unknown)
    container: str
    resource: str
    numa: int
    size: int


@dataclass(frozen=True)
class Overlay:
    pools: tuple[PoolMark, ...] = ()
    allocations: tuple[AllocationMark, ...] = ()
    devices: tuple[DeviceMark, ...] = ()
    source: str = ""
    notes: tuple[str, ...] = field(default=(), compare=False)
    memory: tuple[MemoryMark, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.pools or self.allocations or self.devices or self.memory)

    def memory_of_node(self, numa: int) -> list[MemoryMark]:
        return [m for m in self.memory if m.numa == numa]

    def pool_of_cpu(self) -> dict[int, PoolMark]:
        return {c: ps[0] for c, ps in self.pools_of_cpu().items()}

    def pools_of_cpu(self) -> dict[int, tuple[PoolMark, ...]]:
        """Every pool holding each CPU, in the overlay's order: pools may share CPUs (the
        reclaim pool overlaps the shared pool up to its minimum), and a CPU two pools hold
        is drawn in both."""
        out: dict[int, tuple[PoolMark, ...]] = {}
        for p in self.pools:
            for c in p.cpus:
                out[c] = (*out.get(c, ()), p)
        return out

    def allocation_of_cpu(self) -> dict[int, AllocationMark]:
        out: dict[int, AllocationMark] = {}
        for a in self.allocations:
            for c in a.cpus:
                out.setdefault(c, a)
        return out

    def device(self, dev_id: str) -> DeviceMark | None:
        for d in self.devices:
            if d.id == dev_id:
                return d
        return None

    # -- JSON ---------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "format": OVERLAY_FORMAT,
            "source": self.source,
            "pools": [
                {"name": p.name, "cpus": str(p.cpus), **({} if p.pressure is None else {"pressure": p.pressure})}
                for p in self.pools
            ],
            "allocations": [
                {"pod": a.pod, "container": a.container, "cpus": str(a.cpus), "pool": a.pool} for a in self.allocations
            ],
            "devices": [
                {"id": d.id, "resource": d.resource, "health": "Healthy" if d.healthy else "Unhealthy",
                 "numa": list(d.numa), **({} if d.pod is None else {"pod": d.pod})}
                for d in self.devices
            ],
            "memory": [
                {"pod": m.pod, "container": m.container, "resource": m.resource, "numa": m.numa, "size": m.size}
                for m in self.memory
            ],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], source: str = "") -> Overlay:
        if not isinstance(doc, Mapping) or doc.get("format") != OVERLAY_FORMAT:
            got = doc.get("format") if isinstance(doc, Mapping) else type(doc).__name__
            raise OverlayError(f"not a {OVERLAY_FORMAT} document (format={got!r})")
        try:
            pools = tuple(
                PoolMark(str(p["name"]), CPUSet.parse(p["cpus"]), None if p.get("pressure") is None else float(p["pressure"]))
                for p in doc.get("pools", ())
            )
            allocs = tuple(
                AllocationMark(str(a["pod"]), str(a.get("container", "")), CPUSet.parse(a["cpus"]), str(a.get("pool", "dedicated")))
                for a in doc.get("allocations", ())
            )
            devices = tuple(
                DeviceMark(
                    str(d["id"]),
                    str(d["resource"]),
                    _health(d.get("health", "Healthy")),
                    tuple(int(n) for n in d.get("numa", ())),
                    None if d.get("pod") is None else str(d["pod"]),
                )
                for d in doc.get("devices", ())
            )
            memory = tuple(
                MemoryMark(str(m["pod"]), str(m.get("container", "")), str(m["resource"]), _count(m["numa"]),
                           _count(m["size"]))
                for m in doc.get("memory", ())
            )
        except (KeyError, TypeError, ValueError, CPUSetError) as e:
            raise OverlayError(f"overlay entry does not parse: {type(e).__name__}: {e}") from None
        return cls(pools, allocs, devices, source or str(doc.get("source", "")), memory=memory)


def _health(value: object) -> bool:
    if value not in ("Healthy", "Unhealthy"):
        raise ValueError(f"health must be Healthy or Unhealthy, got {value!r}")
    return value == "Healthy"


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a NUMA node or byte count is an integer >= 0, got {value!r}")
    return value
