"""CPU pressure onset -> eviction decision within seconds, with real hogs in real
v1 cgroups; the standalone action kills the victim's processes and releases it."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pytest

from agent.cpuset import CPUSet
from agent.pressure.config import PressureConfig
from agent.pressure.engine import PressureEngine

pytestmark = [pytest.mark.root, pytest.mark.bpf]


@dataclass(frozen=True)
class Rec:
    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str
    qos_level: str
    cpuset: CPUSet
    cgroup_path: str | None


class FakePolicy:
    """The part of ``CPUAllocator`` (``CPU_POLICY``) the pressure engine uses."""

    def __init__(self, recs: list[Rec]) -> None:
        self.recs = list(recs)
        self.removed: list[str] = []

    def allocations(self):
        return list(self.recs)

    def remove_pod(self, pod_uid: str) -> None:
        self.removed.append(pod_uid)
        self.recs = [r for r in self.recs if r.pod_uid != pod_uid]


class FakeDevices:
    def __init__(self) -> None:
        self.released: list[str] = []

    def release_pod(self, pod_uid: str) -> None:
        self.released.append(pod_uid)


@pytest.mark.slow
def test_hard_pressure_evicts_reclaimed_pod_and_kills_it(probe_set, hierarchy, cgroup_tree, tmp_path):
    if hierarchy.is_v2:
        pytest.skip("this host keys pods on v2; covered by the v2 accuracy test")
    ncpu = os.cpu_count()
    all_cpus = CPUSet.parse(f"0-{ncpu - 1}")
    dirs = {n: cgroup_tree.make(hierarchy.name, f"{n}/ctr") for n in ("reclaimed", "shared", "dedicated")}
    recs = [
        Rec(f"uid-{n}", "default", f"pod-{n}", "ctr", f"{n}_cores", all_cpus, cgroup_tree.rel(f"{n}/ctr"))
        for n in dirs
    ]
    policy, devices = FakePolicy(recs), FakeDevices()
    cfg = PressureConfig(soft_threshold=0.3, hard_threshold=0.6, window_s=2.0, interval_s=0.5,
                         met_fraction=0.75, cooldown_s=60)
    eng = PressureEngine(cfg, cpu=policy, devices=devices, probes=probe_set,
                         record_path=tmp_path / "evictions.jsonl", cgroup_roots=(cgroup_tree.rel(""),))
    eng.load()
    eng.tick()
    victims = [cgroup_tree.spawn([dirs["reclaimed"]]) for _ in range(2 * ncpu)]
    shared = [cgroup_tree.spawn([dirs["shared"]]) for _ in range(ncpu)]
    dedicated = [cgroup_tree.spawn([dirs["dedicated"]]) for _ in range(ncpu)]
    onset = time.monotonic()
    decided = None
    while time.monotonic() - onset < 20:
        time.sleep(cfg.interval_s)
        res = eng.tick()
        if res.evictions:
            decided = time.monotonic()
            break
    assert decided is not None, f"no decision; pools: {eng.evaluator.status}"
    print(f"onset -> decision {decided - onset:.2f} s")
    (ev,) = res.evictions
    assert ev.pod_uid == "uid-reclaimed" and ev.reason == "cpu_pressure_hard"
    assert ev.evidence["pool_pressure"] >= cfg.hard_threshold
    for p in victims:
        assert p.wait(timeout=5) == -9  # SIGKILLed by the standalone action
    assert all(p.poll() is None for p in shared + dedicated)
    assert policy.removed == ["uid-reclaimed"] and devices.released == ["uid-reclaimed"]
    rec = eng.record.recent[-1]
    assert rec["outcome"]["killed_processes"] == len(victims) and rec["action"] == "standalone"
    assert "uid-reclaimed" in (tmp_path / "evictions.jsonl").read_text()
    # cool-down: the still-loaded pool evicts nobody else for now
    for _ in range(4):
        time.sleep(cfg.interval_s)
        assert not eng.tick().evictions
