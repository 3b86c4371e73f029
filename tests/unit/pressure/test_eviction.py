from __future__ import annotations

import pytest

from agent.cpuset import CPUSet
from agent.pressure.eviction import EvictionPolicy, PressureEvaluator, pools_of
from agent.contracts.pressure import Container, normalize_qos

S = 1_000_000_000  # ns per s
POOL = CPUSet.parse("0-3")


def c(uid, qos, name="ctr", cpus=POOL):
    return Container(uid, name, qos, cpus, f"/kubepods/{uid}/{name}")


def run(ev: PressureEvaluator, containers, rates: dict, seconds: int, psi_rate: float | None = None, t0: int = 0):
    """Feed constant wait rates (s/s per container key) for `seconds` 1-s ticks; return all evictions."""
    out = []
    totals = {k.key: 0 for k in containers}
    psi = 0
    for t in range(t0, t0 + seconds + 1):
        out += ev.evaluate(float(t), containers, dict(totals), None if psi_rate is None else psi)
        for k in totals:
            totals[k] += int(rates.get(k, 0) * S)
        psi += int((psi_rate or 0) * 1e6)
    return out


POLICY = EvictionPolicy(soft=0.5, hard=1.0, window_s=3, interval_s=1, met_fraction=0.6, cooldown_s=30, psi_confirm=0)


def test_hard_pressure_takes_reclaimed_before_shared():
    cs = [c("r1", "reclaimed_cores"), c("s1", "shared_cores"), c("s2", "shared_cores")]
    evs = run(PressureEvaluator(POLICY), cs, {("r1", "ctr"): 0.1, ("s1", "ctr"): 4.0, ("s2", "ctr"): 1.0}, 5)
    assert [e.pod_uid for e in evs] == ["r1"]
    e = evs[0]
    assert e.reason == "cpu_pressure_hard" and e.signal == "runqueue_delay"
    assert e.evidence["pool_pressure"] == pytest.approx(5.1 / 4) and e.evidence["samples_over"] >= 2


def test_shared_victim_is_the_largest_share_and_dedicated_system_never():
    cs = [c("s1", "shared_cores"), c("s2", "shared_cores"), c("d1", "dedicated_cores"), c("sys", "system_cores")]
    rates = {("s1", "ctr"): 1.0, ("s2", "ctr"): 3.0, ("d1", "ctr"): 9.0, ("sys", "ctr"): 9.0}
    (e,) = run(PressureEvaluator(POLICY), cs, rates, 4)
    assert e.pod_uid == "s2" and e.evidence["pod_share"] == pytest.approx(3 / 22, abs=1e-3)
    only_protected = [c("d1", "dedicated_cores"), c("sys", "system_cores")]
    assert run(PressureEvaluator(POLICY), only_protected, rates, 6) == []


def test_soft_pressure_only_evicts_reclaimed():
    shared_only = [c("s1", "shared_cores")]
    assert run(PressureEvaluator(POLICY), shared_only, {("s1", "ctr"): 2.8}, 6) == []  # 0.7 per CPU: soft only
    mixed = [c("s1", "shared_cores"), c("r1", "reclaimed")]
    (e,) = run(PressureEvaluator(POLICY), mixed, {("s1", "ctr"): 2.0, ("r1", "ctr"): 0.8}, 6)
    assert e.pod_uid == "r1" and e.reason == "cpu_pressure_soft"


def test_needs_enough_samples_in_window_and_respects_cooldown():
    ev = PressureEvaluator(POLICY)
    cs = [c("r1", "reclaimed_cores"), c("r2", "reclaimed_cores")]
    rates = {("r1", "ctr"): 3.0, ("r2", "ctr"): 2.0}
    first = run(ev, cs, rates, 2)  # samples at t=1, t=2: the 2nd one meets "needed" = 2
    assert [e.pod_uid for e in first] == ["r1"] and POLICY.needed == 2
    assert run(ev, cs, rates, 20, t0=3) == []  # cool-down 30 s
    later = run(ev, cs, rates, 15, t0=30)
    assert [e.pod_uid for e in later] == ["r1"]


def test_one_spike_is_not_enough():
    ev = PressureEvaluator(POLICY)
    cs = [c("r1", "reclaimed_cores")]
    out = run(ev, cs, {("r1", "ctr"): 10.0}, 1)
    out += run(ev, cs, {("r1", "ctr"): 0.0}, 5, t0=2)
    assert out == []


def test_psi_must_confirm_when_available():
    pol = EvictionPolicy(soft=0.5, hard=1.0, window_s=3, interval_s=1, met_fraction=0.6, psi_confirm=0.2)
    cs = [c("r1", "reclaimed_cores")]
    assert run(PressureEvaluator(pol), cs, {("r1", "ctr"): 8.0}, 6, psi_rate=0.05) == []
    assert len(run(PressureEvaluator(pol), cs, {("r1", "ctr"): 8.0}, 6, psi_rate=0.5)) == 1
    assert len(run(PressureEvaluator(pol), cs, {("r1", "ctr"): 8.0}, 6, psi_rate=None)) == 1  # no PSI: rq alone


def test_pools_group_overlapping_cpusets():
    a = c("a", "shared", cpus=CPUSet.parse("0-3"))
    r = c("r", "reclaimed", cpus=CPUSet.parse("2-5"))
    d = c("d", "dedicated", cpus=CPUSet.parse("8-9"))
    pools = pools_of([a, r, d])
    assert [(str(p), sorted(x.pod_uid for x in m)) for p, m in pools] == [("0-5", ["a", "r"]), ("8-9", ["d"])]
    assert normalize_qos("Reclaimed_Cores") == "reclaimed" and normalize_qos("shared") == "shared"
