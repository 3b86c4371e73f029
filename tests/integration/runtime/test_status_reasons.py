"""Container states and reasons as the kubelet names them, from real processes and cgroups:
OOMKilled from the memory cgroup's oom_kill count, a completed init container that stays
Completed across a daemon restart (issue 23)."""

from __future__ import annotations

import asyncio

import pytest

from agent.contracts.pods import ContainerState, PodPhase
from tests.integration.runtime.conftest import make_pod

pytestmark = pytest.mark.timeout(180)


def test_a_memory_hog_is_oomkilled_not_a_plain_error(env):
    async def go():
        rt = env.runtime()
        # the pipe's reader holds everything it reads: the kernel's OOM killer ends it, sh exits 137
        hog = make_pod("hog", ["sh", "-c", "head -c 400000000 /dev/zero | tail"], memory=32 << 20)
        await rt.run(hog)
        st = await env.sink.wait(hog.uid, lambda s: s.phase.terminal)
        c = st.containers[0]
        assert st.phase == PodPhase.FAILED, st
        assert (c.state, c.reason, c.exit_code) == (ContainerState.TERMINATED, "OOMKilled", 137), c
        # a plain failure with the same status is an Error, not an OOM
        plain = make_pod("plain", ["sh", "-c", "exit 137"], memory=32 << 20)
        await rt.run(plain)
        st = await env.sink.wait(plain.uid, lambda s: s.phase.terminal)
        assert (st.containers[0].reason, st.containers[0].exit_code) == ("Error", 137), st
        assert env.dirs() == []

    asyncio.run(go())


def test_a_completed_init_container_stays_completed_after_a_restart(env):
    pod = make_pod("inits", ["sleep", "300"], init=[["true"]])

    async def first():
        rt = env.runtime()
        await rt.run(pod)
        await env.sink.wait(pod.uid, lambda s: s.phase == PodPhase.RUNNING)
        await rt.close(stop_workloads=False)  # the daemon goes; the app keeps running

    asyncio.run(first())
    env.sink.history.clear()

    async def second():
        rt = env.runtime()
        await rt.restore([pod])
        st = await env.sink.wait(pod.uid, lambda s: s.phase == PodPhase.RUNNING, timeout=60)
        init = st.containers[0]
        assert (init.name, init.state, init.reason, init.exit_code) == (
            "init0", ContainerState.TERMINATED, "Completed", 0), init
        await rt.stop(pod.uid, 0)
        assert env.dirs() == []

    asyncio.run(second())
