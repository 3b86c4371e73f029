"""Prometheus view of the pressure engine, built at scrape time from its last readings.

A custom collector (not module-level Counters) because the numbers live in BPF
maps and the label sets must follow what exists now: the top-N cgroups by
run-queue delay get their own series and the rest are summed into
cgroup="other", so a node with thousands of cgroups still exports a bounded set.

Cgroups of known containers (the CPU policy's, and in kubelet mode every one
the pod directory names) are exported by who they are, not where they are:
``hwagent_pressure_container_runqueue_delay_seconds{namespace,pod,container,qos}``,
at most ``max_container_series`` label sets plus one pod="other" row. Their
paths never appear in the per-cgroup family, and a container that is gone is
not yielded at the next scrape, so its series disappear.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from agent.cgroups.hierarchy import relative_cgroup_path
from agent.contracts.hist import Histogram, prometheus_buckets
from agent.pressure.readers import block_name
from agent.cgroups.ancestry import nearest_ancestor

__all__ = ["PressureCollector", "top_n", "container_series", "OTHER_LABELS"]

#: the row that sums every container past the cap
OTHER_LABELS = ("", "other", "", "")

NS = "hwagent_pressure"


def top_n(by_cgroup: dict[str, Histogram], n: int) -> dict[str, Histogram]:
    """The n cgroups with most delay, plus "other" holding the sum of the rest."""
    ranked = sorted(by_cgroup.items(), key=lambda kv: (-kv[1].sum_ns, kv[0]))
    out = dict(ranked[:n])
    rest = Histogram()
    for _, h in ranked[n:]:
        rest = rest + h
    if rest.count or rest.sum_ns:
        out["other"] = out["other"] + rest if "other" in out else rest
    return out


def _container_index(containers: Any, mounts: dict) -> dict[str, tuple[str, str, str, str]]:
    out = {}
    for c in containers or ():
        if c.cgroup_path:
            rel = relative_cgroup_path(c.cgroup_path, mounts).rstrip("/")
            # a container nobody named is keyed by its cgroup's name; that is no label value
            name = "" if c.container_name == rel.rsplit("/", 1)[-1] else c.container_name
            out[rel] = (c.pod_namespace, c.pod_name or c.pod_uid, name, c.qos)
    return out


def container_series(
    by_cgroup: dict[str, Histogram], containers: Any, cap: int, mounts: dict | None = None
) -> tuple[dict[tuple[str, str, str, str], Histogram], dict[str, Histogram]]:
    """(per-container histograms, capped with an "other" row; the cgroups no container owns).

    A container's sub-cgroups count as the container; two cgroups with the same
    labels (a pod's sandbox and an unnamed container) are summed into one series.
    """
    index = _container_index(containers, mounts or {})
    per: dict[tuple[str, str, str, str], Histogram] = {}
    rest: dict[str, Histogram] = {}
    for path, h in by_cgroup.items():
        who = nearest_ancestor(index, path) if index else None
        if who is None:
            if "/kubepods" not in path:  # a pod's own cgroup is not a series of its own either
                rest[path] = h
            continue
        per[who] = per[who] + h if who in per else h
    ranked = sorted(per.items(), key=lambda kv: (-kv[1].sum_ns, kv[0]))
    out = dict(ranked[:cap])
    other = Histogram()
    for _, h in ranked[cap:]:
        other = other + h
    if other.count or other.sum_ns:
        out[OTHER_LABELS] = other
    return out, rest


def _hist(fam: HistogramMetricFamily, labels: list[str], h: Histogram) -> None:
    fam.add_metric(labels, prometheus_buckets(h), h.sum_ns / 1e9)


class PressureCollector:
    def __init__(self, engine: Any, state: Callable[[], str] | None = None, *, pod_labels: bool = True) -> None:
        """``pod_labels``: serve the series labelled with pods (``[daemon] metrics_pod_labels``);
        without, those families are served empty (their names stay: a dashboard finds no series,
        not an unknown metric)."""
        self.engine = engine
        #: the component's set-up state ("loading", "running", "failed"); None outside the daemon
        self.state = state
        self.pod_labels = pod_labels

    def _held_health(self, e: Any) -> GaugeMetricFamily:
        """Device health with the pod holding the device (kubelet mode: from pod-resources)."""
        fam = GaugeMetricFamily(f"{NS}_held_device_healthy",
                                "Health of a device a pod holds, naming the pod (1 healthy, 0 not)",
                                labels=["kind", "device", "resource", "device_id", "namespace", "pod", "container"])
        board, pods = getattr(e, "device_health", None), getattr(e, "pod_directory", None)
        if not self.pod_labels:
            return fam
        targets = getattr(board, "targets", None)
        if targets is None or pods is None:
            return fam
        directory = pods.current
        for (kind, key), ok in sorted(e.health.state.items()):
            for resource, dev_id in targets(kind, key):
                h = directory.holder_of(resource, dev_id)
                if h is not None:
                    fam.add_metric([kind, key, resource, dev_id, h.namespace, h.pod, h.container], 1.0 if ok else 0.0)
        return fam

    def describe(self) -> list:
        return []  # dynamic: don't let the registry call collect() at registration

    def _setup_families(self, e: Any) -> Iterator:
        """How each probe runs (BPF or fallback) and where set-up stands."""
        attached = GaugeMetricFamily(f"{NS}_probe_attached", "1 when the probe runs in BPF, 0 when its fallback runs",
                                     labels=["probe", "mode"])
        for name, (mode, _detail) in e.status().items():
            attached.add_metric([name, mode], 1.0 if mode == "bpf" else 0.0)
        yield attached

        if self.state is not None:
            now = self.state()
            st = GaugeMetricFamily(f"{NS}_probes_state",
                                   "1 for the probes' current set-up state (loading: compiling in the background)",
                                   labels=["state"])
            for name in ("loading", "running", "failed"):
                st.add_metric([name], 1.0 if now == name else 0.0)
            yield st

    def collect(self) -> Iterator:
        t0 = time.perf_counter()
        e = self.engine
        cfg = e.cfg
        yield from self._setup_families(e)

        rq = HistogramMetricFamily(
            f"{NS}_runqueue_delay_seconds",
            "Time threads spent runnable waiting for a CPU, per cgroup (top N by total, rest in other)",
            labels=["cgroup"],
        )
        # without pod labels every cgroup stays in the per-cgroup family, named by its path (pod
        # UIDs, not names), and the per-container family is empty
        containers = getattr(e, "containers", ()) if self.pod_labels else ()
        per_container, rest = container_series(
            e.last_runqueue, containers, cfg.max_container_series, getattr(e, "mounts", {}))
        for path, h in sorted(top_n(rest, cfg.top_cgroups).items()):
            _hist(rq, [path], h)
        yield rq

        crq = HistogramMetricFamily(
            f"{NS}_container_runqueue_delay_seconds",
            "Time a container's threads spent runnable waiting for a CPU (top N containers by total, "
            "the rest summed in pod=\"other\")",
            labels=["namespace", "pod", "container", "qos"],
        )
        for labels, h in sorted(per_container.items()):
            _hist(crq, list(labels), h)
        yield crq

        lat = HistogramMetricFamily(f"{NS}_block_request_duration_seconds", "Block request issue-to-completion time",
                                    labels=["device", "op"])
        names: dict[str, str] = {}
        for (dev, op), h in sorted(e.last_block.latency.items()):
            if h.slots:  # diskstats fallback has no histogram; it is not exported as one
                names.setdefault(dev, block_name(dev, e.sysfs_root))
                _hist(lat, [names[dev], op], h)
        yield lat

        errs = CounterMetricFamily(f"{NS}_block_request_errors", "Failed block requests",
                                   labels=["device", "op", "errno"])
        for (dev, op, errno), n in sorted(e.last_block.errors.items()):
            names.setdefault(dev, block_name(dev, e.sysfs_root))
            errs.add_metric([names[dev], op, str(errno)], n)
        yield errs

        net = CounterMetricFamily(f"{NS}_net_tx_failures", "Transmit failures per interface", labels=["interface", "kind"])
        for ifname, c in sorted(e.last_net.items()):
            net.add_metric([ifname, "error"], c.tx_errors)
            net.add_metric([ifname, "busy"], c.tx_busy)
            net.add_metric([ifname, "timeout"], c.tx_timeouts)
        yield net

        iommu = CounterMetricFamily(f"{NS}_iommu_faults", "IOMMU DMA page faults per device", labels=["device"])
        for dev, n in sorted(e.last_extras.iommu_faults.items()):
            iommu.add_metric([dev], n)
        yield iommu

        trips = CounterMetricFamily(f"{NS}_thermal_trips", "Thermal trip crossings", labels=["zone", "trip_type"])
        for (zone, tt), n in sorted(e.last_extras.thermal_trips.items()):
            trips.add_metric([zone, {0: "active", 1: "passive", 2: "hot", 3: "critical"}.get(tt, str(tt))], n)
        yield trips

        unhandled = CounterMetricFamily(f"{NS}_irq_unhandled", "Hard IRQs no handler claimed (IRQ_NONE)",
                                        labels=["irq"])
        for irq, (_c, u) in sorted(e.last_extras.irqs.items()):
            if u:
                unhandled.add_metric([str(irq)], u)
        yield unhandled

        health = GaugeMetricFamily(f"{NS}_device_healthy", "Device health as decided from error counters",
                                   labels=["kind", "device"])
        for (kind, key), ok in sorted(e.health.state.items()):
            health.add_metric([kind, key], 1.0 if ok else 0.0)
        yield health
        yield self._held_health(e)

        ev = CounterMetricFamily(f"{NS}_evictions", "Evictions decided from CPU pressure", labels=["reason", "signal"])
        for (reason, signal), n in sorted(e.evictions_total.items()):
            ev.add_metric([reason, signal], n)
        yield ev

        pool = GaugeMetricFamily(f"{NS}_pool_cpu_pressure_ratio",
                                 "Run-queue wait per CPU of the pool over the last interval", labels=["pool"])
        met = GaugeMetricFamily(f"{NS}_pool_threshold_met", "1 when the pool's soft/hard threshold is met",
                                labels=["pool", "kind"])
        for name, st in sorted(e.evaluator.status.items()):
            pool.add_metric([name], st.pressure)
            met.add_metric([name, "soft"], 1.0 if st.soft_met else 0.0)
            met.add_metric([name, "hard"], 1.0 if st.hard_met else 0.0)
        yield pool
        yield met

        thr = GaugeMetricFamily(f"{NS}_eviction_threshold", "Configured pool pressure thresholds", labels=["kind"])
        thr.add_metric(["soft"], cfg.soft_threshold)
        thr.add_metric(["hard"], cfg.hard_threshold)
        yield thr

        took = GaugeMetricFamily(f"{NS}_collector_duration_seconds", "Time to build these metrics")
        took.add_metric([], time.perf_counter() - t0)
        yield took
