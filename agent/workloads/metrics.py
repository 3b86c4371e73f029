"""Prometheus metrics of standalone admission (default REGISTRY).

The topology manager's own ``hwagent_topology_manager_admission_*`` series come
from ``agent.topologymanager``; these are the workload-level ones.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import Counter, Gauge, Histogram

from agent.contracts.pods import QOS_DEDICATED, QOS_RECLAIMED, QOS_SHARED, QOS_SYSTEM

ADMITTED_PODS = Gauge("hwagent_workloads_admitted_pods", "Admitted pods not yet terminated, by QoS.", ["qos"])
ADMISSIONS = Counter(
    "hwagent_workloads_admissions_total",
    "Admit calls by outcome (admitted, refused, dry_run) and gRPC code name.",
    ["outcome", "code"],
)
ADMIT_DURATION = Histogram(
    "hwagent_workloads_admit_duration_seconds",
    "Time to admit a pod: validation, topology, CPU and device allocation, persistence.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
)
MANIFEST_FILE_ERRORS = Gauge(
    "hwagent_workloads_manifest_file_errors", "Files in the static manifest directory that are not admitted now."
)
MANIFEST_SYNCS = Counter(
    "hwagent_workloads_manifest_changes_total", "Static manifest changes applied, by action.", ["action"]
)
RELEASES = Counter("hwagent_workloads_releases_total", "Pods whose CPUs and devices were released, by why.", ["why"])

_QOS = (QOS_SHARED, QOS_DEDICATED, QOS_RECLAIMED, QOS_SYSTEM)


def publish_admitted(live_per_qos: Mapping[str, int]) -> None:
    """The admitted-pods gauge from the registry's counts (kept per change: this
    costs the same with 10 pods or 10,000)."""
    for q in (*_QOS, *(k for k in live_per_qos if k not in _QOS)):
        ADMITTED_PODS.labels(q).set(live_per_qos.get(q, 0))
