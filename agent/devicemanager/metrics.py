"""Prometheus metrics of the device-plugin host.

Naming: where the kubelet has a metric for the same thing we keep its name
after our ``hwagent_`` prefix instead of ``kubelet_`` (same suffix, same
labels, same meaning), so dashboards port by swapping the prefix and a node
running both a kubelet and hwagent never exports two series of one name:

- ``hwagent_device_plugin_registration_total{resource}`` = kubelet_device_plugin_registration_total
  (counted before validation, like the kubelet)
- ``hwagent_device_plugin_alloc_duration_seconds{resource}`` = kubelet_device_plugin_alloc_duration_seconds
  (latency of the plugin's Allocate RPC)

(The pod-resources server's counters are in ``agent.podresources.metrics``.)

hwagent-only (the kubelet has none): capacity/allocatable gauges per resource,
endpoints per state, allocation outcomes, checkpoint errors.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

REGISTRATIONS = Counter(
    "hwagent_device_plugin_registration",
    "Device-plugin registrations received (before validation), per resource.",
    ["resource"],
)
ALLOC_DURATION = Histogram(
    "hwagent_device_plugin_alloc_duration_seconds",
    "Duration of the device plugin's Allocate RPC, per resource.",
    ["resource"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
ALLOCATIONS = Counter(
    "hwagent_device_manager_allocations",
    "Container device allocations by outcome (ok, error, reused).",
    ["resource", "outcome"],
)
CAPACITY = Gauge(
    "hwagent_device_plugin_capacity_devices",
    "Devices a resource has (healthy + unhealthy).",
    ["resource"],
)
ALLOCATABLE = Gauge(
    "hwagent_device_plugin_allocatable_devices",
    "Healthy devices of a resource.",
    ["resource"],
)
ALLOCATED = Gauge(
    "hwagent_device_plugin_allocated_devices",
    "Devices of a resource held by containers.",
    ["resource"],
)
ENDPOINTS = Gauge(
    "hwagent_device_plugin_endpoints",
    "Plugin endpoints per resource and state (connected, stopped).",
    ["resource", "state"],
)
CHECKPOINT_ERRORS = Counter(
    "hwagent_device_manager_checkpoint_errors",
    "Checkpoint failures: corrupt (file set aside at start), read, write.",
    ["kind"],
)
