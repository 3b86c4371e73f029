"""Prometheus metrics of the advisor (default REGISTRY)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

SHARED_CPUS = Gauge("hwagent_advisor_shared_pool_cpus", "CPUs the advisor holds the shared pool at (0: none set).")
SHARED_BOUNDS = Gauge("hwagent_advisor_shared_pool_bound_cpus",
                      "The shared pool's bounds now: min (its requests) and max (not reserved, not dedicated).",
                      ["bound"])
QUOTA_CPUS = Gauge("hwagent_advisor_reclaim_quota_cpus",
                   "CPU quota of all reclaimed pods together (-1: not suppressed).")
HEADROOM_CPUS = Gauge("hwagent_advisor_reclaim_headroom_cpus",
                      "CPUs reclaimed pods may use now: the reclaim pool, under the quota when suppressed.")
P99_SECONDS = Gauge("hwagent_advisor_shared_runqueue_p99_seconds",
                    "Run-queue delay p99 of the shared pool's containers over the last interval (-1: none measured).")
TARGET_SECONDS = Gauge("hwagent_advisor_target_seconds", "The shared pool's run-queue delay p99 target.")
DECISIONS = Counter("hwagent_advisor_decisions_total", "Advisor decisions, by action.", ["action"])
EVICTIONS_ALLOWED = Counter("hwagent_advisor_evictions_allowed_total",
                            "Times the advisor let the pressure engine's eviction go ahead.")

MEMORY_HIGH_PODS = Gauge("hwagent_advisor_memory_high_pods",
                         "Reclaimed pods whose memory.high the advisor has lowered ([advisor] memory_high).")
MEMORY_HIGH_BYTES = Gauge("hwagent_advisor_memory_high_bytes",
                          "Sum of the memory.high the advisor set on reclaimed pods (0: none lowered).")
MEMORY_PSI_SOME = Gauge("hwagent_advisor_memory_psi_some_ratio",
                        "Share of the last interval some task stalled on memory (node PSI; -1: unknown).")
MEMORY_DECISIONS = Counter("hwagent_advisor_memory_decisions_total",
                           "memory.high decisions, by action (hold, lower, raise, lift).", ["action"])
