"""kill -9 of the daemon leaves workloads running; a restarted runtime re-attaches,
records exits that happened meanwhile, repairs drifted settings, and finishes
stops that were cut short. The "daemon" is tests/integration/runtime/driver.py."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.runtime.state import PodFiles, PodRecord
from agent.contracts.pods import ContainerState, PodPhase
from tests.integration.runtime.conftest import make_pod
from tests.integration.runtime.driver import SLOW_STOP_GRACE_S

pytestmark = pytest.mark.timeout(180)

DRIVER = Path(__file__).with_name("driver.py")


def start_driver(env, mode: str) -> subprocess.Popen:
    env.root.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, str(DRIVER), str(env.root), env.subtree, mode], stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    assert line.strip() == "ready", line
    return proc


def admitted(env) -> list:
    return [pickle.loads(p.read_bytes()) for p in sorted((env.root / "admitted").glob("*.pkl"))]


def workload_pids(uids: set[str]) -> dict[int, str]:
    """Processes anywhere on the machine that carry one of these pod uids in their environment."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            envs = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for e in envs:
            if e.startswith(b"HWAGENT_POD_UID=") and e[16:].decode() in uids:
                out[int(d.name)] = e[16:].decode()
    return out


def test_kill9_leaves_workloads_running_and_restore_reattaches(env):
    proc = start_driver(env, "steady")
    pods = {p.spec.name: p for p in admitted(env)}
    assert set(pods) == {"runner", "quitter", "polite"}
    mains = {p.uid: (env.root / "runtime" / p.uid / "main" / "pid").read_text().split() for p in pods.values()}
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.3)
    # the daemon is gone, the workloads and their shims are not
    for shim, pid in mains.values():
        os.kill(int(shim), 0)
        os.kill(int(pid), 0)
    # while it is down: one workload exits with a status, one setting drifts
    quit_at = time.time()
    (env.root / "quit").touch()
    rel = f"{env.subtree}/pod{pods['runner'].uid}/main"
    cpu_dir = next(h.root for h in env.cgroups.hierarchies if "cpu" in h.controllers)
    (cpu_dir / rel.lstrip("/") / "cpu.shares").write_text("1024")
    time.sleep(2.0)

    async def go():
        rt = env.runtime()
        restored_at = time.time()
        await rt.restore(admitted(env))
        st = await env.sink.wait(pods["quitter"].uid, lambda s: s.phase.terminal)
        assert st.phase == PodPhase.FAILED and st.containers[0].exit_code == 3
        # issue 37 item 12: it ended while the runtime was down: its end is the shim's exit record's
        # time, not the restart's
        assert quit_at <= st.containers[0].finished_at < restored_at - 1.0, (quit_at, st, restored_at)
        assert st.finished_at is not None and quit_at <= st.finished_at < restored_at - 1.0, (quit_at, st, restored_at)
        assert env.cgroups.read(rel, "cpu.shares") == "512"  # re-applied
        assert rt.status(pods["runner"].uid).containers[0].state == ContainerState.RUNNING
        # re-attached: a stop after the restart still sees the exit, with its status
        await rt.stop(pods["polite"].uid, 5)
        st = env.sink.last(pods["polite"].uid)
        assert st.phase == PodPhase.SUCCEEDED and st.containers[0].exit_code == 0
        # the restarted runtime supervises: kill the Always workload, it comes back
        old = rt.status(pods["runner"].uid).containers[0].pid
        os.kill(old, signal.SIGKILL)
        st = await env.sink.wait(pods["runner"].uid, lambda s: s.containers[0].restart_count == 1
                                 and s.containers[0].state == ContainerState.RUNNING)
        assert st.containers[0].pid != old
        await rt.stop(pods["runner"].uid, 0)
        assert env.dirs() == []
        assert workload_pids({p.uid for p in pods.values()}) == {}

    asyncio.run(go())


def test_kill9_during_launch_and_stop_churn_leaks_nothing(env):
    rng = random.Random(os.getpid())
    for round_ in range(3):
        proc = start_driver(env, "churn")
        time.sleep(rng.uniform(0.2, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        registry = admitted(env)
        statuses = [json.loads(line) for line in (env.root / "status.jsonl").read_text().splitlines()]
        every = {s["uid"] for s in statuses} | {p.uid for p in registry}

        async def go(registry, every, round_):
            rt = env.runtime()
            env.sink.history.clear()
            # a stop the kill cut short was recorded before its SIGTERM went out: restore finishes it
            stopping = {p.uid for p in registry
                        if (rec := PodFiles(rt.state_root, p.uid).load()) is not None and rec.stopping is not None}
            await rt.restore(registry)
            for uid in stopping:
                await env.sink.wait(uid, lambda status: status.phase.terminal)
            # a launch the kill cut short starts again: wait until every pod has settled
            for p in registry:
                st = rt.status(p.uid)
                if st is not None and st.phase == PodPhase.PENDING:
                    await env.sink.wait(p.uid, lambda status: status.phase != PodPhase.PENDING)
            alive = workload_pids(every)
            # a container the kill caught in its stop (SIGTERM sent, its exit not yet recorded) may
            # end just after restore re-attached to it: the runtime's watcher reports that exit
            for p in registry:
                st = rt.status(p.uid)
                if st is not None and not st.phase.terminal and p.uid not in alive.values():
                    await env.sink.wait(p.uid, lambda new: new.phase.terminal)
            alive = workload_pids(every)
            known = {p.uid for p in registry}
            # never a process without an admitted pod
            assert set(alive.values()) <= known, (round_, set(alive.values()) - known)
            # an admitted pod is running, or reported terminal (admission then releases it)
            for p in registry:
                st = rt.status(p.uid) or env.sink.last(p.uid)
                assert st is not None, p.spec.name
                if st.phase.terminal:
                    assert p.uid not in alive.values()
                else:
                    assert st.phase == PodPhase.RUNNING, (p.spec.name, st)
                    assert p.uid in alive.values()
            # no cgroup of a pod that is not admitted
            pod_dirs = env.cgroups.pod_dirs()
            assert {d[3:] for d in pod_dirs} <= known
            await asyncio.gather(*(rt.stop(p.uid, 0) for p in registry))
            assert env.dirs() == []
            assert workload_pids(every) == {}
            assert not any((env.root / "runtime").iterdir())

        asyncio.run(go(registry, every, round_))
        for f in (env.root / "admitted").glob("*.pkl"):
            f.unlink()


def test_kill9_mid_stop_grants_the_rest_of_the_grace_period(env):
    """A workload told to stop keeps the time it was promised across a daemon restart:
    the restored runtime kills it when the original grace period ends, not at once."""
    proc = start_driver(env, "slowstop")
    (pod,) = admitted(env)
    files = PodFiles(env.root / "runtime", pod.uid)
    while (rec := files.load()) is None or rec.stopping is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert rec.stop_deadline is not None and rec.stop_grace_s == SLOW_STOP_GRACE_S
    assert workload_pids({pod.uid})  # SIGTERM is ignored: the workload outlives the daemon

    async def go():
        rt = env.runtime()
        await rt.restore([pod])
        st = await env.sink.wait(pod.uid, lambda s: s.phase.terminal)
        assert st.phase == PodPhase.FAILED and st.reason == "Stopped", st
        assert st.containers[0].exit_code == 137  # killed at the end, it never exited by itself
        assert st.finished_at >= rec.stop_deadline, (st.finished_at, rec.stop_deadline)
        assert workload_pids({pod.uid}) == {}
        assert env.dirs() == []

    asyncio.run(go())


@pytest.mark.parametrize("recorded", [False, True], ids=["start-not-recorded", "start-recorded-not-reported"])
def test_restore_reports_a_reattached_pod_running_with_its_pid(env, recorded):
    """A kill just after an acknowledged admission can land after the shim started the
    workload but before the runtime recorded the start in pod.json, or before it reported
    it: the registry still says Pending (Admitted). A restore that re-attaches a live
    container must say Running, with the pid, or the pod stays Pending for good."""
    pod = make_pod("fresh", ["sleep", "300"])

    async def first():
        rt = env.runtime()
        await rt.run(pod)
        pid = rt.status(pod.uid).containers[0].pid
        await rt.close(stop_workloads=False)  # the daemon goes; the shim and workload stay
        return pid

    pid = asyncio.run(first())
    files = PodFiles(env.root / "runtime", pod.uid)
    if not recorded:
        files.save(PodRecord(pod.uid, pod.spec.key))  # as written before the start: nothing started yet
    env.sink.history.clear()  # the registry never heard of the start

    async def go():
        rt = env.runtime()
        await rt.restore([pod])
        st = await env.sink.wait(pod.uid, lambda s: s.phase == PodPhase.RUNNING, timeout=60)
        assert st.containers[0].state == ContainerState.RUNNING and st.containers[0].pid == pid, st
        assert st.started_at is not None and st.containers[0].started_at is not None, st
        assert rt.status(pod.uid).phase == PodPhase.RUNNING
        await rt.stop(pod.uid, 0)
        assert env.dirs() == []
        assert workload_pids({pod.uid}) == {}

    asyncio.run(go())
