"""Pods run through containerd's CRI are named by hwagent's views from what the runtime tells the NRI plugin.

A private containerd 1.7 (NRI on) runs pods the way the kubelet asks for them:
each under a cgroup parent of the kubelet's shape (``.../kubepods/besteffort/pod<uid>``,
``.../kubepods/burstable/pod<uid>``, ``.../kubepods/pod<uid>`` for Guaranteed),
here below a test-owned subtree the test removes. hwagent's plugin runs in this
process on its own loop; the pod directory it publishes (``agent.nri.directory``)
must name every container with the sandbox's namespace, pod, container and QoS,
at the cgroup the kernel reports for the container's process, and so must what
reads the directory: the pressure signals' containers and their metric labels,
and `hwagent status`'s pods. After the pods are removed they are gone.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agent.api.cri.v1 import api_pb2 as cri_pb
from agent.contracts.hist import Histogram
from agent.contracts.poddirectory import PodDirectory
from agent.cpuset import CPUSet
from agent.nri.config import NriConfig
from agent.nri.directory import NriPodDirectorySource
from agent.nri.plugin import NriPlugin
from agent.pressure.metrics import container_series
from agent.status.views import Handles, pods_view
from tests.cgroup_support import rmdir_cgroup_tree
from tests.integration.nri.containerd import Containerd, skip_reason
from tests.integration.nri.cri import CriClient, Pod
from tests.integration.nri.image import IMAGE, build_pause_archive

pytestmark = [pytest.mark.root, pytest.mark.slow]

_SKIP = skip_reason() or (None if shutil.which("gcc") and shutil.which("ctr") else "needs gcc and ctr")
if _SKIP:
    pytestmark.append(pytest.mark.skip(reason=_SKIP))

CGROUP_ROOT = Path("/sys/fs/cgroup")
T = TypeVar("T")


class InProcessPlugin:
    """hwagent's NRI plugin on a loop of its own thread; the test reads its directory on that loop,
    as the daemon's views read it on theirs."""

    def __init__(self, socket: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.plugin = NriPlugin(NriConfig(enabled=True, socket_path=str(socket), reconnect_interval_s=0.1))
        self.source = NriPodDirectorySource(self.plugin.view, CPUSet.parse("0-1"), source="NRI runtime (test)")
        self._stop = asyncio.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.plugin.run(self._stop))

    def on_loop(self, fn: Callable[[], T]) -> T:
        async def call() -> T:
            return fn()
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(5)

    def directory(self) -> PodDirectory:
        return self.on_loop(lambda: self.source.current)

    def wait(self, what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.on_loop(check):
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} never happened; directory: {self.directory()}")
            time.sleep(0.05)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def _cgroup_dirs(parent: str) -> list[Path]:
    return [d / parent.lstrip("/") for d in [CGROUP_ROOT, *CGROUP_ROOT.iterdir()] if d.is_dir()]


def _kernel_cgroup(pid: int) -> str:
    """The process's cgroup in the cpu controller's hierarchy (v1), or the unified one."""
    lines = [ln.split(":", 2) for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines()]
    for _, controllers, path in lines:
        if "cpu" in controllers.split(","):
            return path
    return next(path for hid, _, path in lines if hid == "0")


@pytest.fixture
def world() -> Iterator[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="nri-views-", dir="/tmp"))
    ctd = Containerd(base)
    parent = f"/hwagent-nri-views-{uuid.uuid4().hex[:8]}"
    cri: CriClient | None = None
    plugin: InProcessPlugin | None = None
    try:
        archive = build_pause_archive(base)
        ctd.start()
        ctd.ctr("images", "import", str(archive))
        cri = CriClient(ctd.cri_socket)
        plugin = InProcessPlugin(ctd.nri_socket)
        plugin.wait("registration", lambda: plugin is not None and plugin.plugin.state.registered)
        yield {"cri": cri, "parent": parent, "plugin": plugin, "base": base, "containerd": ctd}
    finally:
        if cri is not None:
            for pod_id in cri.pod_ids():
                cri.remove_pod(pod_id)
            cri.close()
        if plugin is not None:
            plugin.close()
        ctd.stop()
        for d in _cgroup_dirs(parent):
            if d.is_dir():
                rmdir_cgroup_tree(d)
        shutil.rmtree(base, ignore_errors=True)


def _container(cri: CriClient, pod: Pod, name: str, *, quota: int = 0, period: int = 0, shares: int = 2) -> str:
    """CreateContainer + StartContainer with the CPU resources the kubelet would set for the pod's class."""
    config = cri_pb.ContainerConfig(
        metadata=cri_pb.ContainerMetadata(name=name, attempt=0), image=cri_pb.ImageSpec(image=IMAGE),
        log_path=f"{name}.log",
        linux=cri_pb.LinuxContainerConfig(resources=cri_pb.LinuxContainerResources(
            cpu_shares=shares, cpu_quota=quota, cpu_period=period, memory_limit_in_bytes=64 << 20)))
    cid = cri._rt.CreateContainer(cri_pb.CreateContainerRequest(  # noqa: SLF001 - the client has no quota flag
        pod_sandbox_id=pod.id, config=config, sandbox_config=pod.config), timeout=cri.timeout).container_id
    cri.start_container(cid)
    return cid


def test_cri_pods_are_named_by_the_directory_pressure_metrics_and_status_then_gone(world: dict[str, Any]) -> None:
    cri: CriClient = world["cri"]
    plugin: InProcessPlugin = world["plugin"]
    parent, logs = world["parent"], world["base"] / "logs"

    # the kubelet's three classes, and Katalyst's annotation, each as the kubelet would hand them to the runtime
    pods = {
        "guaranteed": cri.run_pod("db-0", "shop", "uid-db-0", cgroup_parent=f"{parent}/kubepods/poduid-db-0",
                                  log_dir=logs),
        "burstable": cri.run_pod("web-1", "shop", "uid-web-1", log_dir=logs,
                                 cgroup_parent=f"{parent}/kubepods/burstable/poduid-web-1"),
        "besteffort": cri.run_pod("batch-7", "jobs", "uid-batch-7", log_dir=logs,
                                  cgroup_parent=f"{parent}/kubepods/besteffort/poduid-batch-7"),
        "katalyst": cri.run_pod("api-2", "shop", "uid-api-2", log_dir=logs,
                                cgroup_parent=f"{parent}/kubepods/burstable/poduid-api-2",
                                annotations={"katalyst.kubewharf.io/qos_level": "dedicated_cores"}),
    }
    ids = {
        "guaranteed": _container(cri, pods["guaranteed"], "postgres", quota=200000, period=100000, shares=2048),
        "burstable": _container(cri, pods["burstable"], "nginx", shares=512),
        "besteffort": _container(cri, pods["besteffort"], "work"),
        "katalyst": _container(cri, pods["katalyst"], "srv", shares=1024),
    }
    expected = {
        "guaranteed": ("shop", "db-0", "postgres", "dedicated"),
        "burstable": ("shop", "web-1", "nginx", "shared"),
        "besteffort": ("jobs", "batch-7", "work", "reclaimed"),
        "katalyst": ("shop", "api-2", "srv", "dedicated"),
    }
    plugin.wait("every container named", lambda: {c.container for c in plugin.source.current.containers}
                >= {"postgres", "nginx", "work", "srv"})
    d = plugin.directory()

    for key, cid in ids.items():
        pid = cri.container_pid(cid)
        kernel = _kernel_cgroup(pid)  # where the kernel says the container's process is
        who = d.container_of(kernel)
        assert who is not None, f"{key}: {kernel} not in {d.containers}"
        assert (who.namespace, who.pod, who.container, who.qos) == expected[key]
        assert who.cgroup == kernel and who.pod_uid == f"uid-{expected[key][1]}"
    # each pod's sandbox is listed too, with its pod's names and no container name (as kubelet mode does)
    sandboxes = {(c.namespace, c.pod) for c in d.containers if not c.container}
    assert sandboxes == {(ns, pod) for ns, pod, _, _ in expected.values()}

    # pressure reads the same directory; a run-queue reading keyed by the kernel's cgroup gets the pod's labels
    pressure = plugin.on_loop(plugin.source.containers_for_pressure)
    reading = {_kernel_cgroup(cri.container_pid(ids["besteffort"])): Histogram.from_slots([0, 3], 5_000_000)}
    series, rest = container_series(reading, pressure, cap=10)
    assert list(series) == [("jobs", "batch-7", "work", "reclaimed")] and rest == {}

    # hwagent status's pods, in kubelet mode, from the directory
    listed, source = plugin.on_loop(lambda: pods_view(Handles(pods=plugin.source)))
    assert source == "NRI runtime (test)"
    assert {(p["namespace"], p["name"], p["qos"], tuple(p["containers"])) for p in listed} == {
        (ns, pod, qos, (ctr,)) for ns, pod, ctr, qos in expected.values()}

    for pod in pods.values():
        cri.remove_pod(pod.id)
    plugin.wait("every pod gone", lambda: not plugin.source.current.containers)
    assert plugin.on_loop(lambda: pods_view(Handles(pods=plugin.source)))[0] == []


def _container_series() -> dict[tuple[str, str, str, str], float]:
    """hwagent_pressure_container_runqueue_delay_seconds_sum by its labels, as /metrics serves it."""
    from prometheus_client import REGISTRY, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.labels["namespace"], s.labels["pod"], s.labels["container"], s.labels["qos"]): s.value
            for f in text_string_to_metric_families(generate_latest(REGISTRY).decode()) for s in f.samples
            if s.name == "hwagent_pressure_container_runqueue_delay_seconds_sum"}


def test_a_busy_nri_container_has_its_run_queue_series_labelled_by_its_pod(world: dict[str, Any]) -> None:
    """The real pressure engine (eBPF run-queue probe) beside the plugin on one loop, as in the daemon:
    CPU hogs inside a CRI pod's container cgroup make a series labelled with its namespace, pod,
    container and QoS; none of its labels is a cgroup path."""
    import os

    from agent.config import section_defaults
    from agent.contracts import DaemonContext
    from agent.poddirectories import publish_pod_directory
    from agent.pressure.component import PressureComponent
    from agent.topology.sysfs import read_topology
    from tests.cgroup_support import spawn_in

    cri: CriClient = world["cri"]
    parent = world["parent"]
    world["plugin"].close()  # this test runs its own plugin on the pressure engine's loop
    topo = read_topology()
    cfg = (section_defaults()
           .replace("daemon", metrics_pod_labels=True)
           .replace("pressure", interval_s=0.5, blockio=False, netdev=False, iommu=False, thermal=False, irq=False,
                    eviction_enabled=False, max_container_series=10))
    hogs: list[Any] = []

    async def scenario() -> None:
        plugin = NriPlugin(NriConfig(enabled=True, socket_path=str(world["containerd"].nri_socket),
                                     reconnect_interval_s=0.1))
        stop = asyncio.Event()
        task = asyncio.create_task(plugin.run(stop))
        pressure = PressureComponent()
        try:
            while not plugin.state.registered:
                await asyncio.sleep(0.05)
            ctx = DaemonContext(cfg, world["base"] / "root", topo, mode="standalone")
            publish_pod_directory(ctx, NriPodDirectorySource(plugin.view, topo.online, source="NRI runtime (test)"))
            await pressure.start(ctx)
            pod = await asyncio.to_thread(cri.run_pod, "batch-7", "jobs", "uid-batch-7", log_dir=world["base"] / "logs",
                                          cgroup_parent=f"{parent}/kubepods/besteffort/poduid-batch-7")
            cid = await asyncio.to_thread(_container, cri, pod, "work")
            pid = await asyncio.to_thread(cri.container_pid, cid)
            # the container's cgroup in every hierarchy it has one (the v1 controllers)
            dirs = [CGROUP_ROOT / line.split(":", 2)[1].split(",")[0].removeprefix("name=") / line.split(":", 2)[2]
                    .lstrip("/") for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                    if line.split(":", 2)[1] and parent in line]
            dirs = [d for d in dirs if (d / "cgroup.procs").exists()]
            for _ in range(2 * (os.cpu_count() or 1) + 2):
                hogs.append(spawn_in(dirs, ["/bin/sh", "-c", "while :; do :; done"]))
            deadline = time.monotonic() + 90
            series = _container_series()
            while ("jobs", "batch-7", "work", "reclaimed") not in series and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                series = _container_series()
            assert series.get(("jobs", "batch-7", "work", "reclaimed"), 0) > 0, (pressure.state, series)
            assert not any("/" in v for labels in series for v in labels)
        finally:
            for h in hogs:
                h.kill()
                h.wait(5)
            await pressure.stop()
            stop.set()
            await task

    asyncio.run(scenario())
