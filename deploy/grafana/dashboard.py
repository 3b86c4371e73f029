"""Generate deploy/grafana/hwagent.json, the Grafana dashboard for hwagent.

The dashboard is code so that it stays consistent (one datasource variable,
one instance filter, the same panel shapes) and reviewable; the JSON is
committed, and a test checks that it is what this script writes, that every
PromQL expression parses, and that it names only metrics a real scrape has.

    python deploy/grafana/dashboard.py > deploy/grafana/hwagent.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

SEL = 'instance=~"$instance"'
DS = {"type": "prometheus", "uid": "${datasource}"}


class Layout:
    """Places panels on Grafana's 24-column grid, row by row."""

    def __init__(self) -> None:
        self.y = 0
        self.x = 0
        self.row_h = 0
        self.next_id = 1
        self.panels: list[dict[str, Any]] = []

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def add(self, panel: dict[str, Any], w: int, h: int) -> None:
        if self.x + w > 24:
            self._newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        panel["datasource"] = DS
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)

    def _newline(self) -> None:
        if self.x:
            self.y += self.row_h
        self.x = 0
        self.row_h = 0

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}
    if instant:
        t["instant"] = True
    return t


def stat(title: str, expr: str, unit: str = "short", legend: str = "", description: str = "") -> dict[str, Any]:
    return {"type": "stat", "title": title, "description": description,
            "targets": [target(expr, legend, instant=True)],
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "none", "textMode": "auto"}}


def series(title: str, targets: list[dict[str, Any]], unit: str = "short", description: str = "",
           stack: bool = False, thresholds: list[tuple[str, float | None]] | None = None) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": unit, "custom": {"lineWidth": 1, "fillOpacity": 10,
                                                         "stacking": {"mode": "normal" if stack else "none"}}}
    if thresholds:
        defaults["thresholds"] = {"mode": "absolute",
                                  "steps": [{"color": c, "value": v} for c, v in thresholds]}
        defaults["custom"]["thresholdsStyle"] = {"mode": "line"}
    return {"type": "timeseries", "title": title, "description": description, "targets": targets,
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                        "tooltip": {"mode": "multi"}}}


def bargauge(title: str, expr: str, legend: str, unit: str = "short", description: str = "") -> dict[str, Any]:
    return {"type": "bargauge", "title": title, "description": description,
            "targets": [target(expr, legend, instant=True)],
            "fieldConfig": {"defaults": {"unit": unit, "min": 0}, "overrides": []},
            "options": {"orientation": "horizontal", "displayMode": "gradient",
                        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}}


def panels() -> list[dict[str, Any]]:
    g = Layout()
    g.row("Node overview")
    g.add(stat("CPUs online", f'hwagent_topology_cpus{{{SEL},state="online"}}'), 4, 4)
    g.add(stat("NUMA nodes", f"hwagent_topology_numa_nodes{{{SEL}}}"), 4, 4)
    g.add(stat("Packages", f"hwagent_topology_packages{{{SEL}}}"), 4, 4)
    g.add(stat("Topology warnings", f"hwagent_topology_warnings{{{SEL}}}",
               description="Oddities in what the kernel reports; each is in the start-up log."), 4, 4)
    g.add(stat("Version", f"hwagent_build_info{{{SEL}}}", legend="{{version}}"), 8, 4)
    g.add(bargauge("CPU pools", f"hwagent_cpu_pool_size_cpus{{{SEL}}}", "{{pool}}",
                   description="CPUs in each pool: reserve, share, reclaim and named pools."), 12, 7)
    g.add(bargauge("Containers by QoS", f"sum by (qos) (hwagent_cpu_allocations{{{SEL}}})", "{{qos}}"), 12, 7)

    g.row("CPU pressure")
    g.add(series("Run-queue delay per CPU, by pool",
                 [target(f"hwagent_pressure_pool_cpu_pressure_ratio{{{SEL}}}", "{{pool}}"),
                  target(f'hwagent_pressure_eviction_threshold{{{SEL}}}', "threshold {{kind}}", ref="B")],
                 unit="percentunit",
                 description="Seconds of run-queue wait per second per CPU of the pool; eviction thresholds dashed."),
          12, 8)
    g.add(series("Top cgroups by run-queue delay",
                 [target(f"topk(10, rate(hwagent_pressure_runqueue_delay_seconds_sum{{{SEL}}}[$__rate_interval]))",
                         "{{cgroup}}")],
                 unit="s", description="Seconds spent waiting for a CPU per second, the ten worst containers."),
          12, 8)
    g.add(series("Pools over threshold",
                 [target(f"hwagent_pressure_pool_threshold_met{{{SEL}}}", "{{pool}} {{kind}}")]), 12, 6)
    g.add(series("Run-queue delay p99",
                 [target("histogram_quantile(0.99, sum by (le) "
                         f"(rate(hwagent_pressure_runqueue_delay_seconds_bucket{{{SEL}}}[$__rate_interval])))",
                         "p99")], unit="s"), 12, 6)

    g.row("Devices")
    g.add(series("Devices by resource",
                 [target(f"hwagent_device_plugin_capacity_devices{{{SEL}}}", "{{resource}} capacity"),
                  target(f"hwagent_device_plugin_allocatable_devices{{{SEL}}}", "{{resource}} allocatable", ref="B"),
                  target(f"hwagent_device_plugin_allocated_devices{{{SEL}}}", "{{resource}} allocated", ref="C")]),
          12, 8)
    g.add(series("Unhealthy devices",
                 [target(f"sum by (resource) (hwagent_device_plugin_capacity_devices{{{SEL}}}"
                         f" - hwagent_device_plugin_allocatable_devices{{{SEL}}})", "{{resource}}")],
                 thresholds=[("green", None), ("red", 1)]), 12, 8)
    g.add(series("Device allocations",
                 [target(f"sum by (resource, outcome) (rate(hwagent_device_manager_allocations_total{{{SEL}}}"
                         "[$__rate_interval]))", "{{resource}} {{outcome}}")], unit="ops"), 12, 6)
    g.add(series("Device errors seen by the probes",
                 [target(f"sum by (device) (rate(hwagent_pressure_block_request_errors_total{{{SEL}}}"
                         "[$__rate_interval]))", "block {{device}}"),
                  target(f"sum by (interface) (rate(hwagent_pressure_net_tx_failures_total{{{SEL}}}"
                         "[$__rate_interval]))", "net {{interface}}", ref="B"),
                  target(f"sum by (device) (rate(hwagent_pressure_iommu_faults_total{{{SEL}}}[$__rate_interval]))",
                         "iommu {{device}}", ref="C")], unit="ops"), 12, 6)

    g.row("Evictions")
    g.add(series("Evictions",
                 [target(f"sum by (reason, signal) (increase(hwagent_pressure_evictions_total{{{SEL}}}"
                         "[$__rate_interval]))", "{{reason}} {{signal}}")]), 24, 6)

    g.row("Daemon")
    g.add(series("Component health", [target(f"hwagent_component_healthy{{{SEL}}}", "{{component}}")]), 8, 6)
    g.add(series("Probes in BPF mode", [target(f'hwagent_pressure_probe_attached{{{SEL},mode="bpf"}}',
                                               "{{probe}}")]), 8, 6)
    g.add(stat("Up since", f'process_start_time_seconds{{{SEL},job=~".*hwagent.*"}} * 1000', unit="dateTimeFromNow"),
          8, 6)
    g.add(series("CPU policy call latency p99",
                 [target("histogram_quantile(0.99, sum by (op, le) "
                         f"(rate(hwagent_cpu_request_duration_seconds_bucket{{{SEL}}}[$__rate_interval])))", "{{op}}"),
                  target("histogram_quantile(0.99, sum by (le) "
                         f"(rate(hwagent_device_plugin_alloc_duration_seconds_bucket{{{SEL}}}[$__rate_interval])))",
                         "device Allocate", ref="B")], unit="s",
                 description="Persistence included: this is what an Allocate costs the kubelet or admission."), 8, 7)
    g.add(series("State writes and failures",
                 [target(f"rate(hwagent_cpu_checkpoint_writes_total{{{SEL}}}[$__rate_interval])", "cpu writes"),
                  target(f"sum by (kind) (rate(hwagent_device_manager_checkpoint_errors_total{{{SEL}}}"
                         "[$__rate_interval]))", "device errors {{kind}}", ref="B"),
                  target(f"rate(hwagent_cpu_drift_repaired_total{{{SEL}}}[$__rate_interval])", "cpuset drift repaired",
                         ref="C")], unit="ops"), 8, 7)
    g.add(series("Memory and descriptors",
                 [target(f'process_resident_memory_bytes{{{SEL},job=~".*hwagent.*"}}', "RSS"),
                  target(f'process_open_fds{{{SEL},job=~".*hwagent.*"}}', "open fds", ref="B")], unit="bytes"),
          8, 7)
    return g.panels


def dashboard() -> dict[str, Any]:
    return {
        "title": "hwagent",
        "uid": "hwagent-node",
        "description": "hwagent node agent: topology, CPU pools and pressure, devices, evictions, daemon health.",
        "tags": ["hwagent", "node"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "timezone": "",
        "annotations": {"list": []},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source",
             "current": {}, "hide": 0},
            {"name": "instance", "type": "query", "label": "Node", "datasource": DS,
             "query": {"query": "label_values(hwagent_build_info, instance)", "refId": "instance"},
             "definition": "label_values(hwagent_build_info, instance)",
             "multi": True, "includeAll": True, "allValue": ".*", "refresh": 2, "current": {}, "hide": 0},
        ]},
        "panels": panels(),
    }


def main() -> int:
    json.dump(dashboard(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
