"""The runtime on this machine, as root: a pod with a memory limit and 2 MiB hugepages gets
``memory.limit_in_bytes`` and the hugetlb limit in its container cgroup, its workload maps
its pages, and one that maps more pages than it asked for is stopped by the kernel."""

from __future__ import annotations

import asyncio
import dataclasses
import sys

from pathlib import Path

import pytest

from agent.cgroups.detect import detect
from agent.contracts.pods import AdmittedPod, PodPhase
from tests.integration.memory.test_hugetlb_live import MAPPER, pages  # noqa: F401 - fixture
from tests.integration.runtime.conftest import env, make_pod  # noqa: F401 - fixture

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

MB = 1 << 20


def with_pages(pod: AdmittedPod, size: int) -> AdmittedPod:
    c = pod.spec.containers[0]
    res = dataclasses.replace(c.resources, hugepages={"hugepages-2Mi": size})
    spec = dataclasses.replace(pod.spec, containers=(dataclasses.replace(c, resources=res),))
    return dataclasses.replace(pod, spec=spec)


@pytest.fixture
def hugetlb_control():
    """Set up before ``env`` so that it ends after the pods' cgroups are gone: the unified tree's
    root gets +hugetlb for these pods; the test leaves it as it found it."""
    layout = detect("/sys/fs/cgroup")
    control: Path | None = None
    if layout.mode == "hybrid" and layout.is_v2("hugetlb"):
        control = layout.root / "unified" / "cgroup.subtree_control"
    before = control.read_text().split() if control is not None else []
    yield
    if control is not None and "hugetlb" not in before:
        control.write_text("-hugetlb")


def test_hugepages_pod_limits_and_runs(hugetlb_control, env, pages) -> None:  # noqa: F811
    async def go() -> None:
        rt = env.runtime()
        ok = with_pages(make_pod("fits", [sys.executable, "-c", MAPPER, "4"], memory=256 * MB), 4 * MB)
        over = with_pages(make_pod("over", [sys.executable, "-c", MAPPER, "8"], memory=256 * MB), 4 * MB)
        for pod in (ok, over):
            await rt.run(pod)
        st_ok = await env.sink.wait(ok.uid, lambda s: s.phase.terminal)
        st_over = await env.sink.wait(over.uid, lambda s: s.phase.terminal)
        assert st_ok.phase == PodPhase.SUCCEEDED, st_ok
        assert st_over.phase == PodPhase.FAILED, st_over
        log = (env.root / "logs" / "default_over" / "main.log").read_text()
        assert "touched 2" in log and "touched 3" not in log, log

    async def limits() -> None:
        # the files, read while a pod of the same shape runs
        rt = env.runtime()
        pod = with_pages(make_pod("held", ["sleep", "30"], memory=256 * MB), 6 * MB)
        await rt.run(pod)
        await env.sink.wait(pod.uid, lambda s: s.phase == PodPhase.RUNNING)
        rel = f"{env.subtree}/pod{pod.uid}/main"
        assert int(env.cgroups.read(rel, "memory.limit_in_bytes") or env.cgroups.read(rel, "memory.max")) == 256 * MB
        assert int(env.cgroups.read(rel, "hugetlb.2MB.max") or env.cgroups.read(rel, "hugetlb.2MB.limit_in_bytes")) \
            == 6 * MB
        await rt.stop(pod.uid, 0)

    asyncio.run(go())
    asyncio.run(limits())
    assert env.dirs() == []


def test_a_pod_without_hugepages_gets_none(hugetlb_control, env, pages) -> None:  # noqa: F811
    """Pages reserved on the machine belong to the pods that asked for them: one that did not
    is stopped by the kernel at its first page (its hugetlb limit is 0, as the kubelet sets it)."""
    from agent.runtime.component import hugepage_sizes

    async def go() -> None:
        rt = env.runtime(hugepage_sizes=hugepage_sizes("/sys"))
        pod = make_pod("none", [sys.executable, "-c", MAPPER, "2"], memory=256 * MB)
        await rt.run(pod)
        st = await env.sink.wait(pod.uid, lambda s: s.phase.terminal)
        assert st.phase == PodPhase.FAILED, st
        log = (env.root / "logs" / "default_none" / "main.log").read_text()
        assert "touched 1" not in log, log

    asyncio.run(go())
    assert env.dirs() == []
