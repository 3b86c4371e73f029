"""From the probes' cumulative counters to one interval's sample: pure.

The pressure engine reads the run-queue delay per cgroup (the eBPF probe's log2
histograms, or schedstat sums in its fallback); the advisor takes the growth since
its last reading for the shared pool's containers and interpolates the p99 inside the
log2 slot that holds it (the slots are powers of two µs wide: 256-512 µs is one slot,
too coarse against a 400 µs target). CPU usage comes from the containers' cgroups.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.contracts.hist import Histogram

__all__ = ["quantile_us", "Counters", "interval"]


def quantile_us(h: Histogram, q: float) -> float | None:
    """The ``q`` quantile (µs) of a log2 histogram, linear inside its slot; None without counts
    (the schedstat fallback's histogram holds each thread's mean wait per timeslice per read:
    a coarser p99, agent.pressure.readers.SchedstatRunqueue)."""
    total = h.count
    if not total:
        return None
    want = q * total
    acc = 0
    for s, c in enumerate(h.slots):
        if c and acc + c >= want:
            lo = 0.0 if s == 0 else float(2 ** (s - 1))
            hi = float(2**s)
            return lo + (hi - lo) * max(0.0, min(1.0, (want - acc) / c))
        acc += c
    return float(2 ** len(h.slots))


@dataclass
class Counters:
    """The last cumulative readings, per container key (pod uid, container)."""

    at: float | None = None
    runqueue: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    usage_ns: dict[tuple[str, str], int] = field(default_factory=dict)
    #: the shared pool's delay histograms of the last intervals (newest last), for the p99 over
    #: ``[advisor] signal_window`` intervals
    window: tuple[Histogram, ...] = ()


def interval(prev: Counters, at: float, runqueue: Mapping[tuple[str, str], Histogram],
             usage_ns: Mapping[tuple[str, str], int]) -> tuple[dict[tuple[str, str], Histogram],
                                                            dict[tuple[str, str], float], float, Counters]:
    """(delay histogram growth per container, CPUs used per container, seconds, the new
    counters). A container first seen counts from now (no growth); a counter that went
    back (a restarted container's new cgroup) counts from its new value."""
    dt = (at - prev.at) if prev.at is not None else 0.0
    rq: dict[tuple[str, str], Histogram] = {}
    for k, h in runqueue.items():
        old = prev.runqueue.get(k)
        if old is not None:
            rq[k] = h - old
    used: dict[tuple[str, str], float] = {}
    for k, ns in usage_ns.items():
        old_ns = prev.usage_ns.get(k)
        if old_ns is not None and dt > 0:
            used[k] = max(0, ns - old_ns) / 1e9 / dt
    return rq, used, dt, Counters(at, dict(runqueue), dict(usage_ns))
