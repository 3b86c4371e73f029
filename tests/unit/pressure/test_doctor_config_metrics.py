from __future__ import annotations

import gzip
from types import SimpleNamespace

import pytest

from agent.config import ConfigError, loads
from agent.pressure.config import PressureConfig
from agent.doctor import run_checks
from agent.pressure.eviction import EvictionPolicy, PressureEvaluator
from agent.pressure.health import HealthDriver, HealthPolicy, HealthTracker
from agent.pressure.hist import Histogram
from agent.pressure.metrics import PressureCollector, top_n
from agent.pressure.readers import BlockReading, Extras, NetCounters


def test_doctor_names_each_missing_piece_with_its_fix(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/config.gz").write_bytes(gzip.compress(b"CONFIG_BPF_SYSCALL=y\n# CONFIG_DEBUG_INFO_BTF is not set\nCONFIG_PSI=y\n"))
    (tmp_path / "sys/fs/cgroup/cpu").mkdir(parents=True)
    checks = {c.name: c for c in run_checks("9.9-test", str(tmp_path / "proc"), str(tmp_path / "sys"),
                                             str(tmp_path / "mod"), str(tmp_path / "boot"), check_bcc=False)}
    assert not checks["CONFIG_DEBUG_INFO_BTF"].ok and "CONFIG_DEBUG_INFO_BTF=y" in checks["CONFIG_DEBUG_INFO_BTF"].fix
    assert not checks["CONFIG_BPF_EVENTS"].ok  # absent from the file = not set
    assert checks["CONFIG_PSI"].ok
    assert not checks["BTF"].ok and not checks["tracefs"].ok and "mount -t tracefs" in checks["tracefs"].fix
    assert not checks["headers:build"].ok and "linux-headers" in checks["headers:build"].fix
    assert "9.9-test" in checks["headers:source"].detail
    assert checks["cgroup mode"].detail == "cgroup v1"
    assert not checks["PSI"].ok and "psi=1" in checks["PSI"].fix


def test_doctor_reads_boot_config_when_no_proc_config(tmp_path):
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot/config-1.0").write_text("CONFIG_BPF_SYSCALL=y\nCONFIG_BPF_EVENTS=y\n")
    checks = {c.name: c for c in run_checks("1.0", str(tmp_path / "p"), str(tmp_path / "s"), str(tmp_path / "m"),
                                             str(tmp_path / "boot"), check_bcc=False)}
    assert checks["CONFIG_BPF_EVENTS"].ok and "boot/config-1.0" in checks["CONFIG_BPF_EVENTS"].detail


def test_pressure_config_section_is_strict():
    cfg = loads("[pressure]\nsoft_threshold = 0.4\nblockio = false\n")["pressure"]
    assert cfg.soft_threshold == 0.4 and "blockio" not in cfg.enabled_probes()
    with pytest.raises(ConfigError, match="soft_threshold"):
        loads("[pressure]\nsoft_threshold = 2.0\nhard_threshold = 1.0\n")
    with pytest.raises(ConfigError, match="runqlatt"):
        loads("[pressure]\nrunqlatt = false\n")
    with pytest.raises(ConfigError, match="cgroup_hierarchy"):
        loads("[pressure]\ncgroup_hierarchy = 'memory'\n")


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
