"""Reclaimed pods under their own idle subtree (issue 26), on this machine's cgroups.

The runtime subtree must stay non-idle (it holds the shared pods) and competes at the
cgroup root with the rest of the machine; with the hogs in it, it carried their CPU time
there and a shared pod's wake-up lost to whatever else ran. Reclaimed pods therefore live
in a sibling subtree whose ``cpu.idle`` is 1: both are the runtime's, for every path check,
restore, kill and removal."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from agent.contracts.pods import QOS_RECLAIMED, ContainerState, PodPhase
from tests.integration.runtime.conftest import make_pod
from tests.integration.runtime.test_restore import admitted, start_driver

pytestmark = pytest.mark.timeout(180)


def cpu_dir(env) -> Path:
    return next(h.root for h in env.cgroups.hierarchies if "cpu" in h.controllers)


def idle(env, rel: str) -> str:
    return (cpu_dir(env) / rel.lstrip("/") / "cpu.idle").read_text().strip()


def cgroup_of(pid: int) -> str:
    """The process's path in the v1 cpu hierarchy (``/proc/<pid>/cgroup``)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _n, ctrls, path = line.split(":", 2)
        if "cpu" in ctrls.split(","):
            return path
    raise AssertionError(f"pid {pid} has no cpu cgroup")


def running_pid(env, uid: str) -> int:
    st = env.sink.last(uid)
    assert st is not None and st.containers[0].state == ContainerState.RUNNING, st
    return st.containers[0].pid


def test_a_reclaimed_pod_lives_in_the_idle_subtree_and_a_shared_pod_does_not(env):
    async def go():
        rt = env.runtime()
        rec = make_pod("rec", ["sleep", "30"], qos=QOS_RECLAIMED, cpu_request=250)
        shr = make_pod("shr", ["sleep", "30"])
        await rt.run(rec)
        await rt.run(shr)
        await env.sink.wait(rec.uid, lambda s: s.phase == PodPhase.RUNNING)
        await env.sink.wait(shr.uid, lambda s: s.phase == PodPhase.RUNNING)
        rpod, spod = f"{env.reclaimed}/pod{rec.uid}", f"{env.subtree}/pod{shr.uid}"
        assert cgroup_of(running_pid(env, rec.uid)) == f"{rpod}/main"
        assert cgroup_of(running_pid(env, shr.uid)) == f"{spod}/main"
        # idle: the subtree (what competes at the root), the pod and the container; the
        # runtime subtree and the shared pod are not
        assert [idle(env, r) for r in (env.reclaimed, rpod, f"{rpod}/main")] == ["1", "1", "1"]
        assert [idle(env, r) for r in (env.subtree, spod, f"{spod}/main")] == ["0", "0", "0"]
        # describe (and exec, which joins what describe lists) sees the pod where it is
        procs = rt.processes(rec.uid)
        assert procs.cgroup == rpod and procs.containers["main"].cgroup == f"{rpod}/main"
        assert procs.cgroup_dirs and all(env.reclaimed in d for d in procs.cgroup_dirs)
        assert procs.containers["main"].pids == (running_pid(env, rec.uid),)
        assert rt.owns_cgroup(f"{rpod}/main") and rt.owns_cgroup(f"{spod}/main")
        await asyncio.gather(rt.stop(rec.uid, 0), rt.stop(shr.uid, 0))
        assert env.sink.last(rec.uid).reason == "Stopped"
        assert env.dirs() == []

    asyncio.run(go())


def test_after_a_kill9_the_reclaimed_pod_is_found_reattached_and_stopped(env):
    proc = start_driver(env, "reclaimed")
    pods = {p.spec.name: p for p in admitted(env)}
    hog = pods["hog"]
    pid = int((env.root / "runtime" / hog.uid / "main" / "pid").read_text().split()[1])
    assert cgroup_of(pid) == f"{env.reclaimed}/pod{hog.uid}/main"
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    async def go():
        rt = env.runtime()
        await rt.restore(admitted(env))
        st = await env.sink.wait(hog.uid, lambda s: s.phase == PodPhase.RUNNING)
        assert st.containers[0].pid == pid
        assert rt.processes(hog.uid).containers["main"].pids == (pid,)
        await rt.stop(hog.uid, 0)
        await rt.stop(pods["ls"].uid, 0)
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
            assert time.monotonic() < deadline, "the reclaimed pod's process outlived its stop"
            await asyncio.sleep(0.02)
        assert env.dirs() == []

    asyncio.run(go())


def test_a_reclaimed_orphan_is_killed_and_removed_at_restore(env):
    proc = start_driver(env, "reclaimed")
    hog = next(p for p in admitted(env) if p.spec.name == "hog")
    pid = int((env.root / "runtime" / hog.uid / "main" / "pid").read_text().split()[1])
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    async def go():
        rt = env.runtime()
        await rt.restore([])  # admission no longer has them
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
            assert time.monotonic() < deadline, "the orphan's process was not killed"
            await asyncio.sleep(0.02)
        assert env.dirs() == []

    asyncio.run(go())

