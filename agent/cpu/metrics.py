"""Prometheus metrics of the CPU policy (default REGISTRY)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from agent.cpu.state import PolicyState

POOL_SIZE = Gauge("hwagent_cpu_pool_size_cpus", "CPUs in each pool.", ["pool"])
ALLOCATIONS = Gauge("hwagent_cpu_allocations", "Containers holding a cpuset, by QoS level.", ["qos"])
FAILURES = Counter(
    "hwagent_cpu_failures_total", "Refused or failed policy calls, by call and reason.", ["op", "reason"]
)
REQUESTS = Counter("hwagent_cpu_requests_total", "Policy calls served, by call.", ["op"])
DURATION = Histogram(
    "hwagent_cpu_request_duration_seconds",
    "Time to serve a policy call (gRPC or in-process, persistence included).",
    ["op"],
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
DRIFT_FOUND = Counter("hwagent_cpu_drift_found_total", "Container cpusets found different from the allocation.")
DRIFT_REPAIRED = Counter("hwagent_cpu_drift_repaired_total", "Drifted container cpusets written back.")
CGROUP_UNRESOLVED = Gauge(
    "hwagent_cpu_cgroup_unresolved", "Containers with a cpuset whose cgroup could not be resolved at the last check."
)
RESIDUAL_REMOVED = Counter("hwagent_cpu_residual_pods_removed_total", "Pods forgotten after leaving the active set.")
CHECKPOINT_WRITES = Counter("hwagent_cpu_checkpoint_writes_total", "Checkpoint files written.")
CPU_IDLE_WRITES = Counter("hwagent_cpu_idle_writes_total", "cpu.idle writes on the reclaimed root cgroup.")

_ALL_QOS = ("shared_cores", "dedicated_cores", "reclaimed_cores", "system_cores")
_seen_pools: set[str] = set()


def publish_state(st: PolicyState) -> None:
    for p in _seen_pools - set(st.pools):
        POOL_SIZE.remove(p)
    _seen_pools.clear()
    for name, cpus in st.pools.items():
        POOL_SIZE.labels(name).set(len(cpus))
        _seen_pools.add(name)
    counts = dict.fromkeys(_ALL_QOS, 0)
    counts.update(st.index().qos_counts)
    for q, n in counts.items():
        ALLOCATIONS.labels(q).set(n)
