"""How many statuses one job's life reports: a container's exit that ends the pod is reported
once, with the pod's end; an exit while another container still runs is reported at once.

Each status the runtime reports is a synced write of the pod's registry record (admission's
``pod_status_changed``): a one-container job reported its container's exit (pod still Running)
and, right after, the pod's end with the same container status, two record writes for one
event (docs/performance.md). A kill -9 in between loses nothing: the runtime's own files
keep the exit, and the restored runtime reports the pod's end.
"""

from __future__ import annotations

import asyncio

from agent.contracts.pods import ContainerState, PodPhase

from .conftest import Sink, make_pod


def terminal(st) -> bool:
    return st.phase.terminal


def ended_before_the_pod(st, name: str) -> bool:
    """``name`` exited and the pod has not ended (Pending while a sibling is created, or Running)."""
    return not st.phase.terminal and any(
        c.name == name and c.state == ContainerState.TERMINATED for c in st.containers)


def test_a_job_whose_only_container_exits_reports_its_end_once(env):
    async def go() -> None:
        rt = env.runtime()
        pod = make_pod("once", ["true"], restart="Never")
        await rt.run(pod)
        st = await env.sink.wait(pod.uid, terminal)
        assert st.phase == PodPhase.SUCCEEDED and st.containers[0].exit_code == 0
        history = env.sink.history[pod.uid]
        assert not [s for s in history if ended_before_the_pod(s, "main")], \
            f"the container's exit was reported before the pod's end: {[(s.phase.value, s.containers[0].state.value) for s in history]}"

    asyncio.run(go())


def test_an_exit_while_another_container_runs_is_reported_at_once(env, tmp_path):
    async def go() -> None:
        rt = env.runtime()
        gate = tmp_path / "go"
        pod = make_pod("two", ["true"], restart="Never",
                       extra=[("side", ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"])])
        await rt.run(pod)
        await env.sink.wait(pod.uid, lambda s: ended_before_the_pod(s, "main"))
        gate.touch()
        st = await env.sink.wait(pod.uid, terminal)
        assert st.phase == PodPhase.SUCCEEDED

    asyncio.run(go())


class _Policy:
    """A CPU policy that records the runtime's binds; it holds a pod until ``release``."""

    def __init__(self) -> None:
        self.binds: list[tuple[str, str | None]] = []
        self.held: set[str] = set()

    async def bind_cgroup(self, uid: str, name: str, rel: str | None) -> bool:
        if uid not in self.held:
            raise KeyError(f"pod {uid} is not held")
        self.binds.append((name, rel))
        return False  # nothing enforces here: the runtime writes the placement itself

    def placement(self, uid: str, name: str):
        from types import SimpleNamespace

        from agent.cpuset import CPUSet

        return SimpleNamespace(cpus=CPUSet.parse("0"), mems=None) if uid in self.held else None


def test_a_job_released_with_its_end_is_not_unbound_first(env):
    """The pod's end releases its CPUs (admission, on the terminal report); unbinding each container
    just before was one more committed CPU-journal change (and an enforcer pass) per job for a
    binding the release drops anyway (issue 23). A pod the policy still holds after the report
    (nobody released it) is unbound as before."""
    async def go() -> None:
        policy = _Policy()

        class Releasing(Sink):
            async def pod_status_changed(self, uid, status) -> None:
                if status.phase.terminal:
                    policy.held.discard(uid)
                await super().pod_status_changed(uid, status)

        env.sink = Releasing()
        rt = env.runtime(cpu_policy=lambda: policy)
        pod = make_pod("released", ["true"], restart="Never")
        policy.held.add(pod.uid)
        await rt.run(pod)
        await env.sink.wait(pod.uid, terminal)
        await _until(lambda: pod.uid not in rt._pods)
        assert [r for _n, r in policy.binds] == [rt.cgroups.path(f"pod{pod.uid}", "main")], policy.binds

        kept = make_pod("kept", ["true"], restart="Never")
        policy.held.add(kept.uid)
        env.sink = Sink()  # nothing releases
        rt2 = env.runtime(cpu_policy=lambda: policy)
        policy.binds.clear()
        await rt2.run(kept)
        await env.sink.wait(kept.uid, terminal)
        await _until(lambda: kept.uid not in rt2._pods)
        assert [r for _n, r in policy.binds] == [rt2.cgroups.path(f"pod{kept.uid}", "main"), None], policy.binds

    asyncio.run(go())


async def _until(cond, timeout: float = 60.0) -> None:
    """Poll ``cond`` on the loop (the runtime finishes a pod after its report returns)."""
    async def loop() -> None:
        while not cond():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(loop(), timeout)
