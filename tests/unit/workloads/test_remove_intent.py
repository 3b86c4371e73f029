"""An interrupted Remove is finished after the restart, never left as a
``Failed (Removed)`` record that needs a second ``rm``.

The registry runs on its real on-disk store; the runtime is a stand-in that does
what the workload runtime does on ``stop`` (report the terminal status) and on
restore (report what it re-attached). A daemon killed mid-remove is a remove()
task cancelled at the step where the kill lands; the restart is a new registry
read from the same directory.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.topologymanager import TopologyManager, TopologyManagerConfig
from agent.workloads.admission import Workloads
from agent.contracts.pods import AdmittedPod, ContainerSpec, PodPhase, PodSpec, PodStatus
from agent.workloads.registry import Registry
from agent.workloads.store import PodFileStore

TIMEOUT_S = 60.0  # generous: a loaded machine; the steps themselves take milliseconds


class Runtime:
    """Stops by reporting the terminal status, as the workload runtime does; ``hang``
    holds a stop where the kill is to land (before or after its terminal report)."""

    def __init__(self, sink: Workloads, hang: str | None = None) -> None:
        self.sink, self.hang = sink, hang
        self.stops: list[tuple[str, str]] = []
        self.reached = asyncio.Event()
        self.on_stop = lambda uid: None

    async def stop(self, uid: str, grace_s: float | None = None, reason: str = "Stopped") -> None:
        self.stops.append((uid, reason))
        self.on_stop(uid)
        if self.hang == "before-terminal":
            self.reached.set()
            await asyncio.Event().wait()
        await self.sink.pod_status_changed(uid, PodStatus(phase=PodPhase.FAILED, reason=reason))
        if self.hang == "after-terminal":
            self.reached.set()
            await asyncio.Event().wait()


def _pod(name: str) -> AdmittedPod:
    spec = PodSpec(name=name, namespace="default", uid=f"uid-{name}",
                   containers=(ContainerSpec("main", ("sleep", "300")),))
    return AdmittedPod(spec=spec, qos="shared", assignments={}, admitted_at=1.0)


def _daemon(base: Path, runtime: list) -> Workloads:
    """A (re)started admission over the registry on disk; ``runtime[0]`` is the deferred runtime."""
    store = PodFileStore(base / "workloads" / "pods", base)
    registry = Registry(store)
    registry.restore(store.load())
    tm = TopologyManager(TopologyManagerConfig(policy="none", scope="container"), (0,))
    return Workloads(registry, tm, (0,), runtime_ref=lambda: runtime[0] if runtime else None)


async def _killed_mid_remove(base: Path, hang: str, status: PodStatus) -> AdmittedPod:
    """Admit a pod that runs (status reported), then kill the daemon inside its Remove."""
    runtime: list = []
    w = _daemon(base, runtime)
    pod = _pod("web")
    await w.registry.add(pod)
    await w.pod_status_changed(pod.uid, status)
    rt = Runtime(w, hang)
    runtime.append(rt)
    task = asyncio.ensure_future(w.remove("web"))
    await asyncio.wait_for(rt.reached.wait(), TIMEOUT_S)
    task.cancel()  # kill -9: nothing after this point happens
    await asyncio.gather(task, return_exceptions=True)
    return pod


def test_remove_records_the_intent_on_disk_before_it_stops_the_pod(tmp_path):
    async def main():
        runtime: list = []
        w = _daemon(tmp_path, runtime)
        pod = _pod("web")
        await w.registry.add(pod)
        await w.pod_status_changed(pod.uid, PodStatus(phase=PodPhase.RUNNING))
        rt = Runtime(w)
        seen: list[bool] = []
        # what a daemon restarted at the moment the stop begins would read
        rt.on_stop = lambda uid: seen.extend(r.removing for r in PodFileStore(
            tmp_path / "workloads" / "pods", tmp_path).load() if r.uid == uid)
        runtime.append(rt)
        gone = await w.remove("web")
        assert seen == [True]
        assert rt.stops == [(pod.uid, "Removed")]
        assert gone.status.phase == PodPhase.FAILED and gone.status.reason == "Removed", gone.status
        assert w.registry.record(pod.uid) is None
        assert PodFileStore(tmp_path / "workloads" / "pods", tmp_path).load() == []

    asyncio.run(main())


def test_a_remove_killed_after_the_terminal_status_is_finished_at_the_restart(tmp_path):
    async def main():
        pod = await _killed_mid_remove(tmp_path, "after-terminal", PodStatus(phase=PodPhase.RUNNING))
        # the restart: admission's reconcile, before any runtime is there
        w = _daemon(tmp_path, [])
        rec = w.registry.record(pod.uid)
        assert rec is not None and rec.status.reason == "Removed"  # what the kill left
        await w.reconcile_after_restore()
        assert w.registry.record(pod.uid) is None, w.registry.record(pod.uid)
        assert PodFileStore(tmp_path / "workloads" / "pods", tmp_path).load() == []

    asyncio.run(main())


def test_a_remove_killed_mid_stop_is_finished_when_the_restored_runtime_reports(tmp_path):
    async def main():
        pod = await _killed_mid_remove(tmp_path, "before-terminal", PodStatus(phase=PodPhase.RUNNING))
        runtime: list = []
        w = _daemon(tmp_path, runtime)
        await w.reconcile_after_restore()
        assert w.registry.record(pod.uid) is not None  # still running: the runtime has to stop it
        rt = Runtime(w)
        runtime.append(rt)
        # the runtime's restore re-attaches the pod and says so; the removal goes on from there
        await w.pod_status_changed(pod.uid, PodStatus(phase=PodPhase.RUNNING))

        async def gone():
            while w.registry.record(pod.uid) is not None:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(gone(), TIMEOUT_S)
        await w.drain()  # the resumed removal's task: its delete is on disk once it returns
        assert rt.stops == [(pod.uid, "Removed")]
        assert PodFileStore(tmp_path / "workloads" / "pods", tmp_path).load() == []

    asyncio.run(main())


def test_a_remove_of_a_pod_no_runtime_ran_is_finished_by_reconcile(tmp_path):
    """No runtime (disabled, or the pod never reached one): the record still says
    Pending (Admitted); the restart releases and forgets it, no runtime needed."""
    async def main():
        pod = await _killed_mid_remove(tmp_path, "before-terminal", PodStatus(reason="Admitted"))
        w = _daemon(tmp_path, [])
        await w.reconcile_after_restore()
        assert w.registry.record(pod.uid) is None

    asyncio.run(main())
