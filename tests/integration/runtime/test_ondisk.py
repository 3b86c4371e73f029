"""The runtime's on-disk names and links, with real processes: a pod name at the
longest admissible length starts and its logs are readable; a link planted where
the runtime keeps a pod's files is refused, never followed; the state is owner-only."""

from __future__ import annotations

import asyncio
import os
import stat

import pytest

from agent.cli import main
from agent.runtime.runtime import log_dir
from agent.workloads.manifest import parse_manifest
from agent.contracts.pods import PodPhase

from .conftest import make_pod

pytestmark = pytest.mark.timeout(120)

terminal = lambda s: s.phase.terminal  # noqa: E731

#: a DNS subdomain of exactly 253 bytes: the longest pod name admission takes
LONGEST = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])


def test_a_253_byte_pod_name_is_admitted_starts_and_its_logs_are_readable(env, capsys):
    assert len(LONGEST) == 253
    manifest = f"metadata: {{name: {LONGEST}}}\nspec: {{containers: [{{name: main, command: [/bin/true]}}]}}\n"
    assert parse_manifest(manifest).pod.name == LONGEST  # admission takes it

    async def go():
        rt = env.runtime()
        pod = make_pod(LONGEST, ["echo", "long name ok"])
        await rt.run(pod)
        st = await env.sink.wait(pod.uid, terminal)
        assert st.phase == PodPhase.SUCCEEDED, st
        assert env.dirs() == []

    asyncio.run(go())
    assert log_dir(env.root, "default", LONGEST).is_dir()
    assert main(["logs", "--root-dir", str(env.root), LONGEST]) == 0
    assert capsys.readouterr().out == "long name ok\n"


def test_a_link_planted_at_the_pods_log_dir_is_refused_and_nothing_lands_outside(env, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()

    async def go():
        rt = env.runtime()
        pod = make_pod("planted", ["echo", "should not be written"])
        d = log_dir(env.root, "default", "planted")
        d.parent.mkdir(parents=True)
        d.symlink_to(outside)
        await rt.run(pod)
        st = await env.sink.wait(pod.uid, terminal)
        assert st.phase == PodPhase.FAILED and st.reason == "StartError", st
        assert "symbolic link" in st.message and str(d) in st.message, st.message
        assert env.dirs() == []

    asyncio.run(go())
    assert list(outside.iterdir()) == []


def test_the_runtime_state_and_logs_are_owner_only(env):
    async def go():
        rt = env.runtime()
        pod = make_pod("private", ["sleep", "30"])
        await rt.run(pod)
        modes = {p: stat.S_IMODE(os.lstat(p).st_mode) for p in (
            env.root / "runtime", env.root / "runtime" / pod.uid, env.root / "runtime" / pod.uid / "main",
            env.root / "logs", log_dir(env.root, "default", "private"))}
        await rt.stop(pod.uid, 0)
        # logs/ itself may be passed through by a pod's own user (0711, no listing); the rest is owner-only
        want = {p: 0o711 if p == env.root / "logs" else 0o700 for p in modes}
        assert modes == want, {str(p): oct(m) for p, m in modes.items()}

    asyncio.run(go())
