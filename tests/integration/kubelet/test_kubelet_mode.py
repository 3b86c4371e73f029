"""Kubelet mode against a fake kubelet of the tests' own, on the real kernel.

A test-owned kubepods-like tree (``<tree>/kubepods/besteffort/pod<uid>/<id>``)
in the real cpu hierarchy holds two pods' containers; the fake kubelet serves
pod-resources v1 for them and plays Katalyst's plugin watcher; the Katalyst
client speaks evictionplugin.v1alpha1 from the upstream table. With CPU hogs in
one pod its run-queue series carry its namespace/pod/container, and the
EvictionPlugin names it first under pressure, NOT_MET before the hogs.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agent.contracts import POD_DIRECTORY
from agent.contracts import DaemonContext
from agent.config import section_defaults
from agent.kubelet.component import PodDirectoryComponent
from agent.kubelet.evictionplugin import EVICTION_SCOPE, EvictionPluginComponent
from agent.cgroups.hierarchy import detect_hierarchy
from agent.cgroups.mounts import cgroup_mounts
from agent.pressure.component import PressureComponent
from agent.topology.sysfs import read_topology
from tests.integration.pressure.conftest import CgroupTree

from .fake_kubelet import WIRE, FakeContainer, FakeKubelet, FakePluginWatcher, FakePod, KatalystClient

pytestmark = [pytest.mark.root, pytest.mark.slow]

#: generous: two shared cores under a full suite (never a timing assertion, only a give-up point)
DEADLINE_S = 90
HOG = ["/bin/sh", "-c", "while :; do :; done"]
SLEEPER = ["/bin/sleep", "600"]


def _cid() -> str:
    return uuid.uuid4().hex + uuid.uuid4().hex


class Pod:
    def __init__(self, ns: str, name: str, container: str) -> None:
        self.ns, self.name, self.container = ns, name, container
        self.uid = str(uuid.uuid4())
        self.cid = _cid()

    def rel(self) -> str:
        return f"kubepods/besteffort/pod{self.uid}/{self.cid}"


def _write_logs(log_dir: Path, pods: list[Pod]) -> None:
    (log_dir / "pods").mkdir(parents=True, exist_ok=True)
    (log_dir / "containers").mkdir(parents=True, exist_ok=True)
    for p in pods:
        (log_dir / "pods" / f"{p.ns}_{p.name}_{p.uid}" / p.container).mkdir(parents=True, exist_ok=True)
        (log_dir / "containers" / f"{p.name}_{p.ns}_{p.container}-{p.cid}.log").write_text("")


def _container_samples() -> list:
    fams = {f.name: f for f in text_string_to_metric_families(generate_latest(REGISTRY).decode())}
    out = []
    for f in fams.values():
        out.extend(s for s in f.samples if s.name.startswith("hwagent_pressure_container_runqueue_delay_seconds_sum"))
    per_cgroup = [s for f in fams.values() for s in f.samples
                  if s.name.startswith("hwagent_pressure_runqueue_delay_seconds") and "cgroup" in s.labels]
    return out, per_cgroup


@pytest.fixture
def setup(tmp_path):
    h = detect_hierarchy("auto")
    if h.is_v2:
        pytest.skip("this machine's pods live in v1 cpu; the v2 layout is covered by the unit walk tests")
    tree = CgroupTree(cgroup_mounts())
    kroot = Path(f"/tmp/hwk-{os.getpid()}-{uuid.uuid4().hex[:4]}")  # socket paths must stay short
    kubelet = FakeKubelet(kroot)
    try:
        yield h, tree, kubelet, kroot, tmp_path
    finally:
        kubelet.stop()
        tree.cleanup()
        for p in sorted(kroot.rglob("*"), key=lambda p: -len(p.parts)):
            p.rmdir() if p.is_dir() else p.unlink()
        kroot.rmdir()


def test_pod_labels_and_eviction_plugin_under_pressure(setup):
    h, tree, kubelet, kroot, tmp = setup
    hog, idle = Pod("team-a", "burner", "spin"), Pod("team-b", "quiet", "nap")
    kubelet.pods = [FakePod(hog.ns, hog.name, [FakeContainer(hog.container)]),
                    FakePod(idle.ns, idle.name, [FakeContainer(idle.container, {"example.com/disk": ["d0"]})])]
    kubelet.allocatable = {"example.com/disk": ["d0", "d1"]}
    kubelet.start()
    dirs = {p: tree.make(h.name, p.rel()) for p in (hog, idle)}
    _write_logs(tmp / "log", [hog, idle])
    for p in (hog, idle):
        tree.spawn([dirs[p]], SLEEPER)
    regdir = kroot / "plugin-socks"
    cfg = (section_defaults()
           .replace("daemon", metrics_pod_labels=True)  # the per-container series this test reads
           .replace("pressure", interval_s=0.5, window_s=2.0, soft_threshold=0.2, hard_threshold=0.4,
                    met_fraction=0.75, psi_confirm=0.0, cooldown_s=300.0, blockio=False, netdev=False,
                    iommu=False, thermal=False, irq=False, max_container_series=10)
           .replace("kubelet", pod_resources_socket=str(kubelet.socket), refresh_s=0.5, cgroup_root="/" + tree.name,
                    log_dir=str(tmp / "log"), plugin_registration_dir=str(regdir)))
    topo = read_topology()

    async def scenario() -> None:
        ctx = DaemonContext(cfg, tmp / "root", topo, mode="kubelet")
        comps = [PodDirectoryComponent(cfg.sections["kubelet"]), PressureComponent(), EvictionPluginComponent(cfg.sections["kubelet"])]
        started = []
        try:
            for c in comps:
                await c.start(ctx)
                started.append(c)
            directory = ctx.lookup(POD_DIRECTORY).current
            names = {c.cgroup: (c.namespace, c.pod, c.container, c.qos) for c in directory.containers}
            assert names == {tree.rel(hog.rel()): (hog.ns, hog.name, hog.container, "reclaimed"),
                             tree.rel(idle.rel()): (idle.ns, idle.name, idle.container, "reclaimed")}
            assert directory.holder_of("example.com/disk", "d0").pod == idle.name
            assert directory.holder_of("example.com/disk", "d1") is None

            # Katalyst's plugin watcher finds the socket and registers the plugin
            reg = await asyncio.to_thread(FakePluginWatcher(regdir).scan)
            (info,) = reg.values()
            assert info.type == "EvictionPlugin" and info.name == "hwagent-cpu-pressure"
            assert list(info.supported_versions) == ["v1alpha1"]
            client = KatalystClient(info.endpoint)
            active = [client.pod(p.ns, p.name, p.uid) for p in (hog, idle)]
            try:
                token = await asyncio.to_thread(client.call, "GetToken", WIRE["evictionplugin.v1alpha1.Empty"]())
                assert token.token

                # at rest: a few samples in, nothing met, nobody named
                await asyncio.sleep(3 * cfg.sections["pressure"].interval_s + 1)
                rest = await asyncio.to_thread(client.threshold_met, active)
                assert rest.met_type == WIRE["evictionplugin.v1alpha1.ThresholdMetResponse"].DESCRIPTOR \
                    .fields_by_name["met_type"].enum_type.values_by_name["NOT_MET"].number
                assert not rest.condition.met_condition and rest.condition.condition_name == "CPUPressure"
                top = await asyncio.to_thread(client.top_eviction_pods, active)
                assert list(top.target_pods) == []

                # CPU hogs in one pod: more runnable threads than CPUs
                for _ in range(2 * (os.cpu_count() or 1) + 2):
                    tree.spawn([dirs[hog]], HOG)
                deadline = time.monotonic() + DEADLINE_S
                met = rest
                while time.monotonic() < deadline:
                    met = await asyncio.to_thread(client.threshold_met, active)
                    if met.met_type == 2:  # HARD_MET
                        break
                    await asyncio.sleep(0.5)
                assert met.met_type == 2, f"never HARD_MET: observed {met.observed_value} vs {met.threshold_value}"
                assert met.threshold_value == 0.4 and met.observed_value >= 0.4
                assert met.threshold_operator == 1 and met.eviction_scope == EVICTION_SCOPE  # GREATER_THAN
                assert met.condition.met_condition and list(met.condition.effects) == ["NoSchedule"]
                assert met.candidate_pods[0].metadata.uid == hog.uid

                top = await asyncio.to_thread(client.top_eviction_pods, active, 1, EVICTION_SCOPE)
                assert [p.metadata.uid for p in top.target_pods] == [hog.uid]
                assert top.target_pods[0].metadata.name == hog.name
                # the cool-down: asked again at once, nobody
                again = await asyncio.to_thread(client.top_eviction_pods, active, 1)
                assert list(again.target_pods) == []

                # the run-queue series name the hog's pod, never its cgroup path
                samples, per_cgroup = _container_samples()
                by_pod = {(s.labels["namespace"], s.labels["pod"], s.labels["container"], s.labels["qos"]): s.value
                          for s in samples}
                assert by_pod[(hog.ns, hog.name, hog.container, "reclaimed")] > 0
                assert all("kubepods" not in s.labels["cgroup"] for s in per_cgroup)
            finally:
                client.close()

            # the kubelet restarts: new socket, a new pod appears; the directory follows
            late = Pod("team-c", "late", "c1")
            tree.make(h.name, late.rel())
            _write_logs(tmp / "log", [late])
            kubelet.pods.append(FakePod(late.ns, late.name, [FakeContainer(late.container,
                                                                             {"example.com/disk": ["d1"]})]))
            kubelet.restart()
            deadline = time.monotonic() + DEADLINE_S
            svc = ctx.lookup(POD_DIRECTORY)
            while time.monotonic() < deadline and svc.current.holder_of("example.com/disk", "d1") is None:
                await asyncio.sleep(0.3)
            assert svc.current.holder_of("example.com/disk", "d1").pod == "late"
            assert any(c.pod == "late" and c.container == "c1" for c in svc.current.containers)
        finally:
            for c in reversed(started):
                await c.stop()
        assert not (regdir / "hwagent-cpu-pressure.sock").exists()

    asyncio.run(scenario())
