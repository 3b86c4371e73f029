"""Real workloads on this machine's cgroups: a runtime over a test-owned subtree,
an in-test status sink, and AdmittedPods built by hand (admission is another branch)."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from pathlib import Path

import pytest

from agent.cgroups.config import derived_reclaimed_subtree
from agent.cgroups.detect import detect
from agent.cgroups.workload import WorkloadCgroups
from agent.cpuset import CPUSet
from agent.runtime.config import RuntimeConfig
from agent.runtime.runtime import WorkloadRuntime
from agent.contracts.pods import (
    QOS_SHARED,
    AdmittedPod,
    ContainerAssignment,
    ContainerSpec,
    DeviceGrant,
    PodSpec,
    PodStatus,
    Resources,
)
from tests.cgroup_support import rmdir_cgroup_tree


class Sink:
    """Records every status, lets a test wait for a condition."""

    def __init__(self) -> None:
        self.history: dict[str, list[PodStatus]] = {}
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def changed(self) -> asyncio.Event:
        """One event per loop: a test may run several asyncio.run() rounds."""
        loop = asyncio.get_running_loop()
        if self._changed is None or self._loop is not loop:
            self._changed, self._loop = asyncio.Event(), loop
        return self._changed

    async def pod_status_changed(self, uid: str, status: PodStatus) -> None:
        self.history.setdefault(uid, []).append(status)
        self.changed.set()

    def last(self, uid: str) -> PodStatus | None:
        h = self.history.get(uid)
        return h[-1] if h else None

    async def wait(self, uid: str, pred, timeout: float = 120.0) -> PodStatus:
        """Generous: two shared cores under a full suite; never a timing assertion."""
        async def loop() -> PodStatus:
            while True:
                st = self.last(uid)
                if st is not None and pred(st):
                    return st
                self.changed.clear()
                await self.changed.wait()

        return await asyncio.wait_for(loop(), timeout)


def subtree_name() -> str:
    return f"/hwagent-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def make_pod(name: str, argv: list[str], *, qos: str = QOS_SHARED, cpus: str = "0", mems: str | None = None,
             restart: str = "Never", grace: int = 5, init: list[list[str]] = (), memory: int | None = None,
             cpu_request: int | None = 500, cpu_limit: int | None = None, grant: DeviceGrant | None = None,
             working_dir: str | None = None, extra: list[tuple[str, list[str]]] = ()) -> AdmittedPod:
    uid = uuid.uuid4().hex
    res = Resources(cpu_request_milli=cpu_request, cpu_limit_milli=cpu_limit, memory_limit_bytes=memory)
    ctrs = [ContainerSpec("main", tuple(argv), resources=res, working_dir=working_dir)]
    ctrs += [ContainerSpec(n, tuple(a), resources=res) for n, a in extra]
    inits = tuple(ContainerSpec(f"init{i}", tuple(a), kind="init") for i, a in enumerate(init))
    spec = PodSpec(name=name, namespace="default", uid=uid, containers=tuple(ctrs), init_containers=inits,
                   restart_policy=restart, termination_grace_period_s=grace)
    assign = {c.name: ContainerAssignment(c.name, CPUSet.parse(cpus), CPUSet.parse(mems) if mems else None,
                                          grant=grant or DeviceGrant())
              for c in spec.all_containers()}
    return AdmittedPod(spec=spec, qos=qos, assignments=assign, admitted_at=0.0)


FAST = RuntimeConfig(backoff_initial_s=0.2, backoff_max_s=0.8, backoff_reset_s=30.0, pids_max=256,
                     log_max_bytes=0)


class Env:
    def __init__(self, root: Path, subtree: str, cfg: RuntimeConfig) -> None:
        self.root = root
        self.subtree = subtree
        #: reclaimed pods' subtree, derived as the daemon derives it: test-owned too
        self.reclaimed = derived_reclaimed_subtree(subtree)
        self.cfg = cfg
        self.layout = detect("/sys/fs/cgroup")
        self.cgroups = WorkloadCgroups(self.layout, subtree, reclaimed_subtree=self.reclaimed)
        self.sink = Sink()

    def runtime(self, cfg: RuntimeConfig | None = None, **kw) -> WorkloadRuntime:
        return WorkloadRuntime(cfg or self.cfg, WorkloadCgroups(self.layout, self.subtree,
                                                                reclaimed_subtree=self.reclaimed),
                               self.root, lambda: self.sink, **kw)

    def dirs(self) -> list[Path]:
        """Every directory left under the test's subtrees, in any hierarchy."""
        out = []
        for h in self.cgroups.hierarchies:
            for subtree in (self.subtree, self.reclaimed):
                base = h.root / subtree.lstrip("/")
                for p, _d, _f in os.walk(base):
                    if Path(p) != base:
                        out.append(Path(p))
        return out


@pytest.fixture
def env(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    subtree = subtree_name()
    e = Env(tmp_path / "root", subtree, FAST)
    yield e
    # kill and remove whatever a failing test left
    for h in e.cgroups.hierarchies:
        for base in (h.root / subtree.lstrip("/"), h.root / e.reclaimed.lstrip("/")):
            if not base.exists():
                continue
            for p, _d, _f in sorted(os.walk(base), key=lambda t: -len(t[0])):
                try:
                    for pid in Path(p, "cgroup.procs").read_text().split():
                        os.kill(int(pid), 9)
                except OSError:
                    pass
            rmdir_cgroup_tree(base, tries=100, pause_s=0.02)
    shutil.rmtree(tmp_path / "root", ignore_errors=True)
