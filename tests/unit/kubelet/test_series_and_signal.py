"""Bounded pod-labelled series, and the eviction plugin's threshold and candidate order (pure)."""

from __future__ import annotations

from types import SimpleNamespace

from agent.cpuset import CPUSet
from agent.kubelet.pressure_signal import HARD_MET, NOT_MET, SOFT_MET, PoolWatch
from agent.pressure.config import PressureConfig
from agent.pressure.eviction import EvictionPolicy
from agent.contracts.pressure import Container
from agent.contracts.hist import Histogram
from agent.pressure.metrics import OTHER_LABELS, PressureCollector, container_series
from agent.pressure.health import HealthDriver, HealthPolicy, HealthTracker
from agent.pressure.eviction import PressureEvaluator
from agent.pressure.readers import BlockReading, Extras


def _containers(n: int) -> list[Container]:
    return [Container(f"uid-{i}", "c", "shared_cores", CPUSet.parse("0-3"), f"/kubepods/burstable/pod{i}/ctr",
                      f"ns-{i % 7}", f"pod-{i}") for i in range(n)]


def test_thousand_containers_stay_at_the_cap_plus_other():
    cs = _containers(1000)
    by_cgroup = {c.cgroup_path: Histogram((0, i + 1), (i + 1) * 1000) for i, c in enumerate(cs)}
    by_cgroup["/system.slice/sshd.service"] = Histogram((0, 1), 5)
    per, rest = container_series(by_cgroup, cs, 50)
    assert len(per) == 51 and OTHER_LABELS in per
    # the 50 with most delay, by name, and the rest summed
    assert {lab[1] for lab in per if lab != OTHER_LABELS} == {f"pod-{i}" for i in range(950, 1000)}
    assert per[OTHER_LABELS].sum_ns == sum((i + 1) * 1000 for i in range(950))
    assert rest == {"/system.slice/sshd.service": by_cgroup["/system.slice/sshd.service"]}

    eng = SimpleNamespace(
        cfg=PressureConfig(max_container_series=50), sysfs_root="/nonexistent", status=lambda: {},
        last_runqueue=by_cgroup, containers=cs, mounts={}, last_block=BlockReading(), last_net={},
        last_extras=Extras(), health=HealthDriver(HealthTracker(HealthPolicy()), None),
        evaluator=PressureEvaluator(EvictionPolicy()), evictions_total={}, services={},
    )
    fams = {f.name: f for f in PressureCollector(eng).collect()}
    crq = fams["hwagent_pressure_container_runqueue_delay_seconds"]
    label_sets = {tuple(sorted(s.labels.items())) for s in crq.samples if s.name.endswith("_sum")}
    assert len(label_sets) == 51
    assert all("/" not in v for ls in label_sets for _k, v in ls)
    cg = {s.labels["cgroup"] for s in fams["hwagent_pressure_runqueue_delay_seconds"].samples}
    assert cg == {"/system.slice/sshd.service"}
    # a container that is gone is not exported at the next scrape
    eng.containers = cs[:10]
    eng.last_runqueue = {c.cgroup_path: by_cgroup[c.cgroup_path] for c in cs[:10]}
    crq = {f.name: f for f in PressureCollector(eng).collect()}["hwagent_pressure_container_runqueue_delay_seconds"]
    assert {s.labels["pod"] for s in crq.samples} == {f"pod-{i}" for i in range(10)}


def test_same_labels_are_summed_not_duplicated():
    a = Container("u", "", "shared", CPUSet.parse("0"), "/kubepods/podu/x", "ns", "p")
    b = Container("u", "", "shared", CPUSet.parse("0"), "/kubepods/podu/y", "ns", "p")
    per, _ = container_series({"/kubepods/podu/x": Histogram((1,), 10), "/kubepods/podu/y": Histogram((2,), 20),
                               "(other)": Histogram((1,), 1)}, [a, b], 5)
    assert list(per) == [("ns", "p", "", "shared")] and per[("ns", "p", "", "shared")].sum_ns == 30


def _feed(watch: PoolWatch, cs, rates: dict[str, float], steps: int, t0: float = 0.0) -> float:
    totals = {c.key: 0 for c in cs}
    t = t0
    for _ in range(steps + 1):
        watch.observe(t, cs, dict(totals))
        for c in cs:
            totals[c.key] += int(rates.get(c.pod_uid, 0.0) * 1e9)
        t += 1.0
    return t


def test_order_reclaimed_first_then_shared_by_share_and_cooldown():
    pol = EvictionPolicy(soft=0.5, hard=1.0, window_s=3.0, interval_s=1.0, met_fraction=0.6, cooldown_s=30.0)
    cpus = CPUSet.parse("0-1")
    cs = [Container("shared-big", "c", "shared_cores", cpus, "/a", "ns", "big"),
          Container("shared-small", "c", "shared_cores", cpus, "/b", "ns", "small"),
          Container("recl", "c", "reclaimed_cores", cpus, "/c", "ns", "recl"),
          Container("ded", "c", "dedicated_cores", CPUSet.parse("2"), "/d", "ns", "ded")]
    w = PoolWatch(pol)
    t = _feed(w, cs, {}, 4)
    assert w.verdict().level == NOT_MET and w.candidates(t, 5) == []
    t = _feed(w, cs, {"shared-big": 2.0, "shared-small": 0.6, "recl": 0.2, "ded": 5.0}, 4, t)
    v = w.verdict()
    assert v.level == HARD_MET and v.threshold == 1.0 and v.pool in ("0-1", "2")
    cands = w.candidates(t, 10)
    assert [c.pod_uid for c in cands if c.pool == "0-1"] == ["recl", "shared-big", "shared-small"]
    assert "ded" not in {c.pod_uid for c in cands}
    assert w.candidates(t + 1, 10) == []  # cooling down
    assert [c.pod_uid for c in w.candidates(t + 31, 1)] == ["recl"]


def test_soft_met_offers_only_reclaimed():
    pol = EvictionPolicy(soft=0.5, hard=5.0, window_s=3.0, interval_s=1.0, met_fraction=0.6)
    cpus = CPUSet.parse("0")
    cs = [Container("s", "c", "shared", cpus, "/a", "ns", "s"), Container("r", "c", "reclaimed", cpus, "/b", "ns", "r")]
    w = PoolWatch(pol)
    t = _feed(w, cs, {"s": 1.0}, 4)
    assert w.verdict().level == SOFT_MET
    assert [c.pod_uid for c in w.candidates(t, 5)] == ["r"]


def test_unnamed_container_gets_an_empty_label_not_its_id():
    cid = "f" * 64
    c = Container("u", cid, "shared", CPUSet.parse("0"), f"/kubepods/podu/{cid}", "ns", "p")
    per, _ = container_series({f"/kubepods/podu/{cid}": Histogram((1,), 10)}, [c], 5)
    assert list(per) == [("ns", "p", "", "shared")]
