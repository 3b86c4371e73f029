"""The shim reaps what its workload orphans: a grandchild whose parent exited is
re-parented to the shim (a child subreaper), not to PID 1, and is reaped when it
ends, by itself or because the workload did. Both shims: the C one and the
Python fallback."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from agent.contracts.pods import ContainerState

from .conftest import make_pod

pytestmark = pytest.mark.timeout(120)

DEADLINE_S = 60.0  # two shared cores under a full suite: generous, never a timing assertion


def _use_shim(rt, shim: str) -> None:
    if shim == "python":  # the fallback when gcc was missing at set-up
        from agent.runtime import shim as py_shim

        rt.shim = [sys.executable, "-S", py_shim.__file__]
    else:
        assert rt.shim[0].endswith("hwagent-shim"), rt.shim


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a process, None once it is gone (reaped)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


async def _until(cond, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return []


async def _orphan(env, pod, main_pid: int) -> int:
    """The workload's orphaned grandchild (``sleep 300``), once the subshell that started it
    has gone (its parent is no process of the workload any more). Known by its command
    line: under load the subshell can be the only other process for a moment before it
    has forked the sleep, and a workload's own short ``sleep 0.05`` children come and go
    beside it."""
    rel = f"{env.subtree}/pod{pod.uid}/main"

    def others() -> list[int]:
        return [p for p in env.cgroups.pids(rel) if p != main_pid and (_stat(p) or ("Z", 0))[0] != "Z"]

    def alone() -> list[int] | None:
        members = set(env.cgroups.pids(rel))
        o = [p for p in others() if _argv(p) == [b"sleep", b"300"]]
        # the subshell gone: the orphan's parent is no longer a process of the workload
        return o if len(o) == 1 and (st := _stat(o[0])) is not None and st[1] not in members else None

    (orphan,) = await _until(alone, "the orphan alone beside the workload")
    return orphan


async def _reaped(pid: int) -> None:
    """Gone from /proc: reaped by its parent; a zombie never goes."""
    deadline = time.monotonic() + DEADLINE_S
    while (st := _stat(pid)) is not None:
        if time.monotonic() > deadline:
            raise AssertionError(f"pid {pid} not reaped: state {st[0]}, parent {st[1]}")
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("shim", ["c", "python"])
def test_orphaned_grandchild_is_the_shims_and_is_reaped_when_it_dies(env, shim):
    async def go():
        rt = env.runtime()
        _use_shim(rt, shim)
        # the subshell starts `sleep 300` in the background and exits: the sleep is orphaned
        pod = make_pod("orphans", ["sh", "-c", "(sleep 300 &); exec sleep 300"])
        await rt.run(pod)
        st = rt.status(pod.uid)
        assert st is not None and st.containers[0].state == ContainerState.RUNNING, st
        main_pid = st.containers[0].pid
        shim_pid = int((env.root / "runtime" / pod.uid / "main" / "pid").read_text().split()[0])
        orphan = await _orphan(env, pod, main_pid)
        # re-parented to the shim while it lives, not to PID 1
        state = await _until(lambda: (s := _stat(orphan)) and s[1] != main_pid and s, "the orphan's re-parenting")
        assert state[1] == shim_pid, f"the orphan's parent is {state[1]}, not the shim {shim_pid}"
        os.kill(orphan, signal.SIGKILL)
        await _reaped(orphan)
        # the workload itself is untouched
        assert rt.status(pod.uid).containers[0].state == ContainerState.RUNNING
        await rt.stop(pod.uid, 0)
        assert env.dirs() == []

    asyncio.run(go())


@pytest.mark.parametrize("shim", ["c", "python"])
def test_orphans_left_when_the_workload_exits_are_reaped_by_the_shim(env, shim):
    async def go():
        rt = env.runtime()
        _use_shim(rt, shim)
        flag = env.root / "go"
        pod = make_pod("leaver", ["sh", "-c", f"(sleep 300 &); while [ ! -e {flag} ]; do sleep 0.05; done; exit 4"])
        await rt.run(pod)
        main_pid = rt.status(pod.uid).containers[0].pid
        shim_pid = int((env.root / "runtime" / pod.uid / "main" / "pid").read_text().split()[0])
        orphan = await _orphan(env, pod, main_pid)
        state = await _until(lambda: (s := _stat(orphan)) and s[1] != main_pid and s, "the orphan's re-parenting")
        assert state[1] == shim_pid, f"the orphan's parent is {state[1]}, not the shim {shim_pid}"
        flag.touch()
        st = await env.sink.wait(pod.uid, lambda s: s.phase.terminal)
        assert st.containers[0].exit_code == 4, st  # the workload's own status, not the orphan's
        # the workload's exit ends what it left behind, as a container's does, and the shim
        # reaps it before it exits itself: gone by the time the runtime has seen the exit
        assert _stat(orphan) is None, f"pid {orphan} outlived the shim: {_stat(orphan)}"
        await _reaped(orphan)
        assert env.dirs() == []

    asyncio.run(go())
