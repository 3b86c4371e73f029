"""The runtime component in a daemon context: restore at start from the registry,
detach or stop at exit, and eviction through the EVICTOR it publishes."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from agent.contracts import DaemonContext
from agent.config import section_defaults
from agent.contracts import EVICTOR, RUNTIME, WORKLOADS
from agent.contracts.pressure import Eviction
from agent.runtime.component import RuntimeComponent, factory
from agent.runtime.eviction import RuntimeEviction
from agent.topology.model import synthetic
from agent.contracts.pods import ContainerState, PodPhase

from .conftest import Sink, make_pod

pytestmark = pytest.mark.timeout(120)


class Registry(Sink):
    """The WorkloadRegistry side the runtime uses: admitted pods and their statuses."""

    def __init__(self, pods) -> None:
        super().__init__()
        self.pods = {p.uid: p for p in pods}

    def admitted(self):
        return [p for p in self.pods.values() if not (self.last(p.uid) and self.last(p.uid).phase.terminal)]

    def get(self, uid):
        return self.pods.get(uid)

    def status(self, uid):
        return self.last(uid)

    def active_pod_uids(self):
        return frozenset(p.uid for p in self.admitted())


def context(env, registry, stop_on_exit: bool) -> DaemonContext:
    cfg = section_defaults().replace("runtime", cgroup_subtree=env.subtree, pids_max=128,
                                     stop_workloads_on_exit=stop_on_exit, backoff_initial_s=0.1)
    ctx = DaemonContext(cfg, env.root, synthetic(), mode="standalone")
    ctx.publish(WORKLOADS, registry)
    return ctx


def test_factory_is_standalone_only(env):
    cfg = section_defaults()
    assert factory(DaemonContext(cfg, env.root, synthetic(), mode="kubelet")) is None
    assert isinstance(factory(DaemonContext(cfg, env.root, synthetic(), mode="standalone")), RuntimeComponent)
    off = cfg.replace("runtime", enabled=False)
    assert factory(DaemonContext(off, env.root, synthetic(), mode="standalone")) is None


def test_component_restores_detaches_and_stops(env):
    pod = make_pod("svc", ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.05; done"], restart="Always")
    registry = Registry([pod])

    async def go():
        # first start: the registry holds a pod that never ran (the daemon died after admitting it)
        ctx = context(env, registry, stop_on_exit=False)
        comp = factory(ctx)
        await comp.start(ctx)
        assert ctx.lookup(RUNTIME) is comp.runtime
        evictor = ctx.lookup(EVICTOR)
        assert isinstance(evictor, RuntimeEviction) and evictor.accepting()  # pressure's one eviction route
        st = await registry.wait(pod.uid, lambda s: s.phase == PodPhase.RUNNING)
        pid = st.containers[0].pid
        await comp.stop()  # leave workloads running
        assert ctx.lookup(RUNTIME) is None and ctx.lookup(EVICTOR) is None
        os.kill(pid, 0)
        # second start: re-attached, same process
        ctx = context(env, registry, stop_on_exit=True)
        comp = factory(ctx)
        await comp.start(ctx)
        assert comp.runtime.status(pod.uid).containers[0].pid == pid
        assert comp.runtime.status(pod.uid).containers[0].state == ContainerState.RUNNING
        await comp.stop()  # stop_workloads_on_exit: the pod is stopped
        st = registry.last(pod.uid)
        assert st.phase.terminal and st.reason == "Stopped"
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert env.dirs() == []

    asyncio.run(go())


def test_eviction_action_evicts_only_the_runtimes_pods(env, tmp_path):
    pod = make_pod("hog", ["sh", "-c", "while :; do :; done"], qos="reclaimed", grace=1)

    async def go():
        rt = env.runtime()
        await rt.run(pod)
        loop = asyncio.get_running_loop()
        action = RuntimeEviction(rt, loop)
        ev = Eviction(pod.uid, "default", "hog", ("main",), "0-1", "cpu_pressure_soft", "runqueue_delay",
                      time.time(), {"pool_pressure": 0.9, "threshold": 0.5})
        own = f"{env.reclaimed}/pod{pod.uid}/main"  # a reclaimed pod: the reclaimed subtree
        results = {}

        def from_tick_thread():
            results["foreign"] = action.execute(ev, ["/kubepods/besteffort/podx/ctr"])
            results["own"] = action.execute(ev, [own])

        t = threading.Thread(target=from_tick_thread)
        t.start()
        while t.is_alive():
            await asyncio.sleep(0.05)
        assert results["foreign"]["evicted"] is False and "not a workload hwagent runs" in results["foreign"]["refused"]
        assert results["own"]["evicted"] is True
        st = await env.sink.wait(pod.uid, lambda s: s.phase.terminal)
        assert st.phase == PodPhase.FAILED and st.reason == "Evicted"
        assert "cpu_pressure_soft" in st.message and "pool_pressure" in st.message
        assert env.dirs() == []

    asyncio.run(go())
