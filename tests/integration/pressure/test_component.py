"""The pressure component on an asyncio loop, as the daemon runs it: own compile,
metrics registered at scrape time, eviction through the deferred EVICTOR (published
after pressure starts, as the runtime does), never a release of its own."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest
from prometheus_client import REGISTRY, generate_latest

from agent.config import section_defaults
from agent.contracts import CPU_POLICY, EVICTOR
from agent.contracts import DaemonContext
from agent.cpuset import CPUSet
from agent.pressure.component import PressureComponent, factory
from agent.topology.model import synthetic

from .test_eviction import FakePolicy, Rec, RecordingEvictor

pytestmark = [pytest.mark.root, pytest.mark.bpf]


class LoopCheckingPolicy(FakePolicy):
    def __init__(self, recs, loop_thread: list) -> None:
        super().__init__(recs)
        self.loop_thread = loop_thread
        self.called_from: list[int] = []

    def allocations(self):
        self.called_from.append(threading.get_ident())
        return super().allocations()

    def remove_pod(self, pod_uid: str) -> None:
        self.called_from.append(threading.get_ident())
        super().remove_pod(pod_uid)


def test_disabled_by_config_gives_no_component(tmp_path):
    cfg = section_defaults().replace("pressure", enabled=False)
    assert factory(DaemonContext(cfg, tmp_path, synthetic())) is None


@pytest.mark.slow
def test_component_evicts_and_serves_metrics(hierarchy, cgroup_tree, tmp_path):
    pytest.importorskip("bcc")
    if hierarchy.is_v2:
        pytest.skip("pure v2 host")
    cfg = section_defaults().replace("daemon", workload_cgroup_roots=[cgroup_tree.rel("")]).replace(
        "pressure", interval_s=0.5, window_s=2.0, soft_threshold=0.3, hard_threshold=0.6, met_fraction=0.75,
        netdev=False, iommu=False, thermal=False,
    )
    d = cgroup_tree.make(hierarchy.name, "r/ctr")
    ncpu = os.cpu_count()
    rec = Rec("uid-r", "ns", "pod-r", "ctr", "reclaimed_cores", CPUSet.parse(f"0-{ncpu - 1}"), cgroup_tree.rel("r/ctr"))

    async def scenario():
        loop_thread = [threading.get_ident()]
        policy = LoopCheckingPolicy([rec], loop_thread)
        ctx = DaemonContext(cfg, tmp_path, synthetic(), mode="standalone")
        ctx.publish(CPU_POLICY, policy)
        comp = factory(ctx)
        assert isinstance(comp, PressureComponent)
        await comp.start(ctx)
        evictor = RecordingEvictor((cgroup_tree.rel(""),))
        ctx.publish(EVICTOR, evictor)  # after pressure started, as the runtime publishes it
        try:
            assert comp.healthy()
            while not comp.ready():  # the probes compile in the background
                assert comp.state == "loading", comp.state
                await asyncio.sleep(0.05)
            hogs = [cgroup_tree.spawn([d]) for _ in range(2 * ncpu + 1)]
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not evictor.calls:
                await asyncio.sleep(0.2)
            assert evictor.calls == [("uid-r", [cgroup_tree.rel("r/ctr")])]
            assert set(policy.called_from) == set(loop_thread)  # read on the loop only
            assert loop_thread[0] not in evictor.threads  # the evictor runs off the loop
            for h in hogs:
                assert await asyncio.get_running_loop().run_in_executor(None, h.wait, 5) == -9
            text = generate_latest(REGISTRY).decode()
            assert 'hwagent_pressure_probe_attached{mode="bpf",probe="runqlat"} 1.0' in text
            assert 'hwagent_pressure_probe_attached{mode="fallback",probe="netdev"} 0.0' in text
            assert 'hwagent_pressure_evictions_total{reason="cpu_pressure_hard",signal="runqueue_delay"} 1.0' in text
            assert "uid-r" in (tmp_path / "pressure" / "evictions.jsonl").read_text()
        finally:
            await comp.stop()
        assert "hwagent_pressure_probe_attached" not in generate_latest(REGISTRY).decode()

    asyncio.run(scenario())
