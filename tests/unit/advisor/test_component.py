"""The advisor component on a real CPU policy (in memory), a fake cgroup v2 tree and a stand-in
pressure engine: decisions applied through the policy and the cgroup files, recorded, kept
across a restart (or started afresh when the saved state is unreadable), live reconfiguration,
and the eviction gate."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from agent.advisor import component as comp_mod
from agent.advisor.component import AdvisorComponent
from agent.advisor.config import ADVISOR_SECTION
from agent.cgroups.detect import CgroupLayout
from agent.config import section_defaults
from agent.contracts import CPU_POLICY, CPU_SHARED_POOL, EVICTION_GATE, PRESSURE, DaemonContext
from agent.contracts.hist import Histogram
from agent.cpu.durable import DurablePolicy
from agent.tasks import cancel_and_wait
from agent.topology.model import synthetic
from tests.unit.cpu.helpers import Clock, make_policy, req

SUBTREE = "/hwagent.slice"


class FakePressure:
    """Cumulative run-queue counters per container, grown by the test."""

    def __init__(self) -> None:
        self.rq: dict[tuple[str, str], Histogram] = {}
        #: the engine's containers (kubelet mode: with the cgroups of the kubepods tree); the
        #: policy's records carry theirs here (the launcher bound them)
        self.containers: list = []

    def grow(self, key: tuple[str, str], slot: int, n: int) -> None:
        old = self.rq.get(key, Histogram())
        slots = [0] * (slot + 1)
        slots[slot] = n
        self.rq[key] = old + Histogram.from_slots(slots, n * (2**slot) * 1000)

    def container_runqueue(self) -> dict[tuple[str, str], Histogram]:
        return dict(self.rq)


class Env:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.cg = tmp / "cgroup"
        self.clock = Clock(100.0)
        pclock = Clock()
        self.policy = make_policy(pclock, topo=synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2,
                                                          threads_per_core=1), reserved_count=0, reclaim_min=2)
        self.durable = DurablePolicy(self.policy, None)
        self.pressure = FakePressure()
        self.policy.allocate(req(uid="ls", cpus=1))
        self.policy.set_cgroup_path("ls", "c1", f"{SUBTREE}/podls/c1")
        pclock.t += 31  # past ramp-up: the shared pod is in the share pool
        self.policy.resources_allocation()
        for i in range(3):
            self.policy.allocate(req(uid=f"hog{i}", qos="reclaimed_cores", cpus=0.1))
            self.policy.set_cgroup_path(f"hog{i}", "c1", f"{SUBTREE}/podhog{i}/c1")
        for uid in ("ls", "hog0", "hog1", "hog2"):
            d = self.cg / SUBTREE.lstrip("/") / f"pod{uid}"
            (d / "c1").mkdir(parents=True, exist_ok=True)
            (d / "cpu.max").write_text("max 100000\n")
            for x in (d, d / "c1"):
                (x / "cpu.stat").write_text("usage_usec 0\n")

    def ctx(self, **advisor) -> DaemonContext:
        cfg = section_defaults().replace("advisor", enabled=True, **advisor)
        ctx = DaemonContext(cfg, self.tmp / "root", synthetic())
        ctx.publish(CPU_POLICY, self.durable)
        ctx.publish(CPU_SHARED_POOL, self.durable)
        ctx.publish(PRESSURE, self.pressure)  # type: ignore[arg-type]
        return ctx

    def quota(self, uid: str) -> str:
        return (self.cg / SUBTREE.lstrip("/") / f"pod{uid}" / "cpu.max").read_text().strip()


@pytest.fixture
def env(tmp_path, monkeypatch):
    e = Env(tmp_path)
    monkeypatch.setattr(comp_mod, "detect", lambda root: CgroupLayout("v2", e.cg, frozenset({"cpu", "cpuset"})))
    return e


async def started(env: Env, **advisor) -> tuple[AdvisorComponent, DaemonContext]:
    ctx = env.ctx(**advisor)
    c = AdvisorComponent(ctx.config[ADVISOR_SECTION], clock=env.clock)
    await c.start(ctx)
    await cancel_and_wait(c._task)  # the test drives the ticks
    return c, ctx


async def ticks(env: Env, c: AdvisorComponent, n: int, slot: int, hog_cpus: float = 0.6) -> list:
    """``n`` intervals of 1 s: the shared pod waits ~2**slot us per switch-in, each hog uses
    ``hog_cpus`` (their pod cgroups' cpu.stat grows)."""
    out = []
    for _ in range(n):
        env.pressure.grow(("ls", "c1"), slot, 100)
        for i in range(3):
            f = env.cg / SUBTREE.lstrip("/") / f"podhog{i}" / "c1" / "cpu.stat"
            used = int(f.read_text().split()[1]) + int(hog_cpus * 1e6)
            f.write_text(f"usage_usec {used}\n")
        env.clock.t += 1.0
        out.append(await c.tick())
    return out


def test_decisions_applied_recorded_and_kept_across_a_restart(env):
    async def scenario():
        c, ctx = await started(env)
        assert ctx.lookup(EVICTION_GATE) is c
        ds = await ticks(env, c, 12, slot=12)  # ~4 ms waits: far over 400 us
        actions = [d.action for d in ds]
        assert "grow" in actions and "suppress" in actions
        share = env.policy.state.pools["share"]
        assert len(share) == c.state.shared_size and c.state.shared_size > 1
        q = c.state.quota_cpus
        assert q is not None
        each = int(q * 100000 / 3)
        assert {env.quota(f"hog{i}") for i in range(3)} == {f"{max(1000, each)} 100000"}
        assert env.quota("ls") == "max 100000"  # a shared pod is never suppressed
        recs = [json.loads(x) for x in (env.tmp / "root" / "advisor" / "decisions.jsonl").read_text().splitlines()]
        assert [r["action"] for r in recs if r["action"] != "hold"] == [a for a in actions if a != "hold"]
        assert len(recs[-1]["reclaimed_pods"]) == 3 and len(recs[-1]["shared_pods"]) == 1
        assert "headroom" in c.summary()
        # status names the target in effect, the one the decision was taken against (explain's)
        assert f"(target {ds[-1].target_us:.0f}us)" in c.summary()
        learned = c.last
        c.last = dataclasses.replace(learned, target_us=1234.0)  # a learned floor raised it
        assert "(target 1234us)" in c.summary()
        c.last = learned
        await c.stop()
        # stopped: nobody watches, so the quotas are lifted; the state stays on disk
        assert {env.quota(f"hog{i}") for i in range(3)} == {"max 100000"}
        saved = json.loads((env.tmp / "root" / "advisor" / "state.json").read_text())
        assert saved["controller"]["shared_size"] == c.state.shared_size
        size = c.state.shared_size

        c2, _ = await started(env)  # the restart
        assert c2.state.shared_size == size and c2.state.quota_cpus == q
        d = (await ticks(env, c2, 1, slot=12))[0]
        assert len(env.policy.state.pools["share"]) == size and c2.applied_size == size, d
        assert {env.quota(f"hog{i}") for i in range(3)} != {"max 100000"}, d  # suppression carried on
        await c2.stop()

    asyncio.run(scenario())


def test_an_unreadable_saved_state_starts_afresh(env):
    (env.tmp / "root" / "advisor").mkdir(parents=True)
    (env.tmp / "root" / "advisor" / "state.json").write_text("{torn")

    async def scenario():
        c, _ = await started(env)
        assert c.state.shared_size is None and c.state.quota_cpus is None
        d = (await ticks(env, c, 1, slot=5))[0]
        assert d.action == "hold"
        await c.stop()

    asyncio.run(scenario())


def test_reconfigure_takes_a_new_target_live(env):
    async def scenario():
        c, ctx = await started(env)
        ds = await ticks(env, c, 4, slot=12)
        assert any(d.action != "hold" for d in ds)
        c.reconfigure(ctx.config[ADVISOR_SECTION].__class__(enabled=True, target_us=100000.0))
        ds = await ticks(env, c, 3, slot=12)
        assert all(d.target_us == 100000.0 for d in ds)
        assert ds[-1].action in ("hold", "relax")  # ~4 ms is within a 100 ms target
        await c.stop()

    asyncio.run(scenario())


def test_the_gate_lets_only_reclaimed_pods_go_and_only_after_the_floor_held(env):
    async def scenario():
        c, _ = await started(env, evict_after_s=5.0, floor_factor=0.0)  # the fixed target alone
        assert not c.allows_eviction("reclaimed")
        ds = await ticks(env, c, 40, slot=14)
        assert any(d.evict for d in ds)
        last = max(i for i, d in enumerate(ds) if d.evict)
        env.clock.t = ds[last].at + 0.5
        assert c.allows_eviction("reclaimed") and not c.allows_eviction("shared")
        env.clock.t += 10
        assert not c.allows_eviction("reclaimed")
        await c.stop()

    asyncio.run(scenario())


def test_sighup_takes_the_target_live_and_the_switch_at_the_next_start():
    from agent.advisor.config import LIVE_SETTINGS
    from agent.daemon.reload import plan_reload

    running = section_defaults().replace("advisor", enabled=True)
    loaded = running.replace("advisor", enabled=False, target_us=2000.0)
    plan = plan_reload(running, loaded, {"advisor": LIVE_SETTINGS})
    assert plan.applied == ("advisor.target_us",) and plan.needs_restart == ("advisor.enabled",)
    assert plan.effective.sections["advisor"].target_us == 2000.0 and plan.effective.sections["advisor"].enabled
