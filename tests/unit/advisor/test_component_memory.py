"""The advisor's memory.high squeeze ([advisor] memory_high) through the component, on a fixture
cgroup v2 tree with the memory controller and a fixture /proc/pressure/memory: lowered under
pressure, raised and lifted when calm, each cgroup's own value back on a clean stop and when
switched off live, recorded in decisions.jsonl and explained by `hwagent explain`; inert on
cgroup v1 with a reason."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from agent.advisor import component as comp_mod
from agent.advisor.component import AdvisorComponent
from agent.advisor.config import ADVISOR_SECTION
from agent.cgroups.detect import CgroupLayout
from agent.commands import explain
from agent.config import section_defaults
from agent.contracts import CPU_POLICY, CPU_SHARED_POOL, PRESSURE, DaemonContext
from agent.tasks import cancel_and_wait
from agent.topology.model import synthetic
from tests.unit.advisor.test_component import SUBTREE, Env

MiB = 1 << 20
HOGS = ("hog0", "hog1", "hog2")
MEM = dict(memory_high=True, memory_high_confirm=2, memory_high_relax_after=3, memory_high_lower_cooldown_s=1.0,
           memory_high_raise_cooldown_s=1.0, memory_high_floor_bytes=32 * MiB)


class MemEnv(Env):
    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.proc = tmp / "proc"
        (self.proc / "pressure").mkdir(parents=True)
        self.some_us = 0
        self.write_psi()
        for uid in HOGS + ("ls",):
            d = self.pod(uid)
            (d / "memory.high").write_text("max\n")
            (d / "memory.current").write_text(f"{400 * MiB}\n")
        (self.pod("hog2") / "memory.high").write_text(f"{1000 * MiB}\n")  # its own

    def pod(self, uid: str) -> Path:
        return self.cg / SUBTREE.lstrip("/") / f"pod{uid}"

    def write_psi(self) -> None:
        (self.proc / "pressure" / "memory").write_text(
            f"some avg10=0.00 avg60=0.00 avg300=0.00 total={self.some_us}\n"
            f"full avg10=0.00 avg60=0.00 avg300=0.00 total={self.some_us // 2}\n")

    def high(self, uid: str) -> str:
        return (self.pod(uid) / "memory.high").read_text().strip()

    def ctx(self, **advisor) -> DaemonContext:
        cfg = section_defaults().replace("advisor", enabled=True, **advisor).replace(
            "daemon", procfs_root=str(self.proc))
        ctx = DaemonContext(cfg, self.tmp / "root", synthetic())
        ctx.publish(CPU_POLICY, self.durable)
        ctx.publish(CPU_SHARED_POOL, self.durable)
        ctx.publish(PRESSURE, self.pressure)  # type: ignore[arg-type]
        return ctx


@pytest.fixture
def env(tmp_path, monkeypatch):
    e = MemEnv(tmp_path)
    monkeypatch.setattr(comp_mod, "detect",
                        lambda root: CgroupLayout("v2", e.cg, frozenset({"cpu", "cpuset", "memory"})))
    return e


async def started(env: MemEnv, **advisor) -> AdvisorComponent:
    ctx = env.ctx(**advisor)
    c = AdvisorComponent(ctx.config[ADVISOR_SECTION], clock=env.clock)
    await c.start(ctx)
    await cancel_and_wait(c._task)  # the test drives the ticks
    return c


async def ticks(env: MemEnv, c: AdvisorComponent, n: int, stall: float) -> list:
    """``n`` intervals of 1 s with the node's memory "some" stall at ``stall`` of each; each hog's
    memory.current follows its memory.high down, as the kernel's reclaim would."""
    out = []
    for _ in range(n):
        env.some_us += int(stall * 1e6)
        env.write_psi()
        env.pressure.grow(("ls", "c1"), 5, 100)  # the CPU side calm
        env.clock.t += 1.0
        out.append(await c.tick())
        for uid in HOGS:
            h = env.high(uid)
            if h != "max":
                cur = int((env.pod(uid) / "memory.current").read_text())
                (env.pod(uid) / "memory.current").write_text(f"{min(cur, int(h))}\n")
    return out


def decisions(env: MemEnv) -> list[dict]:
    return [json.loads(x) for x in (env.tmp / "root" / "advisor" / "decisions.jsonl").read_text().splitlines()]


def test_lowered_under_pressure_raised_when_calm_restored_on_stop(env, capsys):
    async def scenario():
        c = await started(env, **MEM)
        await ticks(env, c, 4, stall=0.3)
        assert c.mem_state.highs, c.last_memory
        for uid in ("hog0", "hog1"):
            assert int(env.high(uid)) < 400 * MiB
        assert int(env.high("hog2")) < 400 * MiB
        assert env.high("ls") == "max"  # a shared pod is never squeezed
        recs = [r for r in decisions(env) if (r.get("memory") or {}).get("action") == "lower"]
        assert recs and recs[0]["memory"]["inputs"]["psi_some"] == pytest.approx(0.3, abs=0.01)
        assert recs[0]["memory"]["who"][f"{SUBTREE}/podhog0"] == "ns/name-hog0"
        assert "memory.high" in c.summary()
        # explain shows it, for the pool and for the pod
        root = env.tmp / "root"
        explain.run(argparse.Namespace(target="pool", namespace="default", format="text", root_dir=str(root),
                                       config=None))
        explain.run(argparse.Namespace(target="name-hog0", namespace="ns", format="text", root_dir=str(root), config=None))
        out = capsys.readouterr().out
        assert "reclaimed pods' memory.high ns/name-hog0" in out and "memory lower:" in out, out
        assert "ns/name-hog0's memory.high" in out and f"memory.high {int(400 * 0.8)}MiB" in out, out
        # calm: raised in steps, then lifted, each cgroup's own value back
        ds = await ticks(env, c, 30, stall=0.0)
        acts = [(d.get("memory") or {}).get("action") for d in decisions(env)]
        assert "lift" in acts, acts
        assert c.mem_state.highs == {}, ds[-1]
        assert env.high("hog0") == "max" and env.high("hog2") == str(1000 * MiB)
        # squeezed again, then a clean stop puts every own value back
        await ticks(env, c, 4, stall=0.3)
        assert env.high("hog0") != "max"
        await c.stop()
        assert [env.high(u) for u in HOGS] == ["max", "max", str(1000 * MiB)]

    asyncio.run(scenario())


def test_switched_off_live_lifts_it(env):
    async def scenario():
        c = await started(env, **MEM)
        await ticks(env, c, 4, stall=0.3)
        assert env.high("hog0") != "max"
        c.reconfigure(c.cfg.__class__(enabled=True, memory_high=False))
        await ticks(env, c, 1, stall=0.3)
        assert [env.high(u) for u in HOGS] == ["max", "max", str(1000 * MiB)]
        await ticks(env, c, 4, stall=0.3)
        assert env.high("hog0") == "max"  # off: nothing lowered
        await c.stop()

    asyncio.run(scenario())


def test_inert_on_cgroup_v1_with_a_reason(env, monkeypatch):
    (env.cg / "memory").mkdir()
    monkeypatch.setattr(comp_mod, "detect", lambda root: CgroupLayout("hybrid", env.cg, frozenset()))

    async def scenario():
        c = await started(env, **MEM)
        assert c.memory_inert is not None and "cgroup v1" in c.memory_inert
        await ticks(env, c, 6, stall=0.5)
        assert env.high("hog0") == "max"
        assert "memory_high inert" in c.summary()
        await c.stop()

    asyncio.run(scenario())


def test_a_crashed_runs_highs_are_put_back_by_the_next_start_with_the_option_off(env):
    async def scenario():
        c = await started(env, **MEM)
        await ticks(env, c, 4, stall=0.3)
        assert env.high("hog0") != "max" and env.high("hog2") != str(1000 * MiB)
        saved = json.loads((env.tmp / "root" / "advisor" / "state.json").read_text())
        assert saved["memory_originals"][f"{SUBTREE}/podhog2"] == 1000 * MiB
        # no stop(): the daemon was killed; the next one starts with memory_high off
        c2 = await started(env, **{**MEM, "memory_high": False})
        await ticks(env, c2, 1, stall=0.3)
        assert [env.high(u) for u in HOGS] == ["max", "max", str(1000 * MiB)]
        await c2.stop()

    asyncio.run(scenario())
