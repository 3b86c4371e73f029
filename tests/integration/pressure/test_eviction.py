"""CPU pressure onset -> eviction decision within seconds, with real hogs in real
v1 cgroups; the decision goes to the published ``EVICTOR`` with the victim's
cgroups, and pressure releases nothing itself."""

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
    """The part of ``CPUAllocations`` (``CPU_POLICY``) the pressure engine uses: it reads, never releases."""

    def __init__(self, recs: list[Rec]) -> None:
        self.recs = list(recs)

    def allocations(self):
        return list(self.recs)


class RecordingEvictor:
    """An ``Evictor`` (``EVICTOR``) that kills the victim's processes, as the runtime's stop
    ends them, and remembers what it was asked; it runs in the engine's thread."""

    name = "recording"

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots
        self.calls: list[tuple[str, list[str]]] = []
        self.threads: list[int] = []

    def accepting(self) -> bool:
        return True

    def execute(self, ev, cgroup_paths):
        import threading

        from agent.cgroups.kill import kill_cgroup
        from agent.cgroups.mounts import cgroup_mounts

        self.threads.append(threading.get_ident())
        self.calls.append((ev.pod_uid, list(cgroup_paths)))
        mounts = cgroup_mounts("/proc")
        killed = sum(kill_cgroup(p, mounts, allowed_roots=self.roots).killed for p in cgroup_paths)
        return {"killed_processes": killed}


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
    policy, evictor = FakePolicy(recs), RecordingEvictor((cgroup_tree.rel(""),))
    cfg = PressureConfig(soft_threshold=0.3, hard_threshold=0.6, window_s=2.0, interval_s=0.5,
                         met_fraction=0.75, cooldown_s=60)
    eng = PressureEngine(cfg, cpu=policy, probes=probe_set, evictor=lambda: evictor,
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
        assert p.wait(timeout=5) == -9  # SIGKILLed by the evictor
    assert all(p.poll() is None for p in shared + dedicated)
    assert evictor.calls == [("uid-reclaimed", [cgroup_tree.rel("reclaimed/ctr")])]
    assert len(policy.recs) == 3  # pressure released nothing: admission does, when the pod ends
    rec = eng.record.recent[-1]
    assert rec["outcome"]["killed_processes"] == len(victims) and rec["action"] == "recording"
    assert "uid-reclaimed" in (tmp_path / "evictions.jsonl").read_text()
    # cool-down: the still-loaded pool evicts nobody else for now
    for _ in range(4):
        time.sleep(cfg.interval_s)
        assert not eng.tick().evictions
