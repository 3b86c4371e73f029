"""Prometheus metrics of the NRI front (default REGISTRY)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

__all__ = ["ADJUSTMENTS", "DECISION_SECONDS", "UPDATES"]

ADJUSTMENTS = Counter(
    "hwagent_nri_adjustments_total",
    "Containers the runtime created, by outcome (adjusted, held, refused: runs unadjusted, ignored: opted "
    "out, off) and QoS level.",
    ["outcome", "qos"],
)
UPDATES = Counter("hwagent_nri_container_updates_total",
                  "Container updates sent to the runtime (re-sized pools, repaired containers), by result.",
                  ["result"])
DECISION_SECONDS = Histogram(
    "hwagent_nri_create_container_seconds",
    "Time from CreateContainer in to the adjustment out (decision and the owners' commit, persisted).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0),
)
