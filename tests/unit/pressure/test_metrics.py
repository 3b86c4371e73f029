"""The pressure metrics collector (agent/pressure/metrics.py): bounded label sets, every family."""

from __future__ import annotations

from types import SimpleNamespace

from agent.pressure.config import PressureConfig
from agent.pressure.eviction import EvictionPolicy, PressureEvaluator
from agent.pressure.health import HealthDriver, HealthPolicy, HealthTracker
from agent.contracts.hist import Histogram
from agent.pressure.metrics import PressureCollector, top_n
from agent.pressure.readers import BlockReading, Extras, NetCounters


def test_top_n_bounds_label_cardinality():
    rows = {f"/c{i}": Histogram((0, 1), i) for i in range(50)}
    t = top_n(rows, 5)
    assert sorted(t) == ["/c45", "/c46", "/c47", "/c48", "/c49", "other"]
    assert t["other"].sum_ns == sum(range(45)) and t["other"].count == 45


def test_collector_exports_bounded_families():
    eng = SimpleNamespace(
        cfg=PressureConfig(top_cgroups=2),
        sysfs_root="/nonexistent",
        status=lambda: {"runqlat": ("bpf", ""), "blockio": ("fallback", "diskstats")},
        last_runqueue={"/a": Histogram((0, 5), 5000), "/b": Histogram((0, 1), 10), "/c": Histogram((0, 1), 1)},
        last_block=BlockReading({("7:0", "write"): Histogram((0, 0, 3), 9000)}, {("7:0", "write", 28): 4}),
        last_net={"eth0": NetCounters(1, 0, 2)},
        last_extras=Extras({"0000:00:01.0": 3}, {("cpu", 3): 1}, {5: (100, 7)}),
        health=HealthDriver(HealthTracker(HealthPolicy()), None),
        evaluator=PressureEvaluator(EvictionPolicy()),
        evictions_total={("cpu_pressure_hard", "runqueue_delay"): 2},
    )
    eng.health.state[("block", "7:0")] = False
    fams = {f.name: f for f in PressureCollector(eng).collect()}
    rq = fams["hwagent_pressure_runqueue_delay_seconds"]
    assert {s.labels["cgroup"] for s in rq.samples} == {"/a", "/b", "other"}
    le = [s for s in rq.samples if s.name.endswith("_bucket") and s.labels["cgroup"] == "/a"]
    assert le[0].labels["le"] == "2e-06" and le[0].value == 5 and le[-1].labels["le"] == "+Inf"
    assert [s.value for s in fams["hwagent_pressure_block_request_errors"].samples if s.name.endswith("_total")] == [4]
    assert fams["hwagent_pressure_device_healthy"].samples[0].value == 0.0
    ev = [s for s in fams["hwagent_pressure_evictions"].samples if s.name.endswith("_total")]
    assert ev[0].labels == {"reason": "cpu_pressure_hard", "signal": "runqueue_delay"} and ev[0].value == 2
    att = {s.labels["probe"]: s.value for s in fams["hwagent_pressure_probe_attached"].samples}
    assert att == {"runqlat": 1.0, "blockio": 0.0}
    thermal = fams["hwagent_pressure_thermal_trips"].samples[0]
    assert thermal.labels == {"zone": "cpu", "trip_type": "critical"}
