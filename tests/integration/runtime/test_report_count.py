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

from .conftest import make_pod


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
