"""A pod run through containerd's CRI reaches hwagent's NRI plugin, event by event.

The kubelet's calls (RunPodSandbox, CreateContainer, StartContainer,
StopPodSandbox, RemovePodSandbox) are made with the tests' own CRI client
against a private containerd 1.7, with the tests' own static pause image; the
pod uses the node's network (no CNI) and its cgroups live under a test-owned
parent that the test removes. The plugin answers CreateContainer with no
adjustment today (docs/nri.md); what is checked here is that every event
arrives, names the pod and container, and that a plugin started later is told
about the running pod by Synchronize.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cgroup_support import rmdir_cgroup_tree
from tests.integration.nri.containerd import Containerd, skip_reason
from tests.integration.nri.cri import CriClient
from tests.integration.nri.image import IMAGE, build_pause_archive
from tests.integration.nri.test_containerd import PluginProcess

pytestmark = [pytest.mark.root, pytest.mark.slow]

_SKIP = skip_reason() or (None if shutil.which("gcc") and shutil.which("ctr") else "needs gcc and ctr")
if _SKIP:
    pytestmark.append(pytest.mark.skip(reason=_SKIP))

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cgroup_dirs(parent: str) -> list[Path]:
    """Every place ``parent`` may exist: one per v1 controller, or the v2 (or hybrid unified) tree."""
    return [d / parent.lstrip("/") for d in [CGROUP_ROOT, *CGROUP_ROOT.iterdir()] if d.is_dir()]


@pytest.fixture
def world() -> Iterator[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="nri-", dir="/tmp"))
    ctd = Containerd(base)
    parent = f"/hwagent-nri-test-{uuid.uuid4().hex[:8]}"
    plugins: list[PluginProcess] = []
    cri: CriClient | None = None
    try:
        archive = build_pause_archive(base)
        ctd.start()
        ctd.ctr("images", "import", str(archive))
        cri = CriClient(ctd.cri_socket)
        yield {"containerd": ctd, "cri": cri, "parent": parent, "plugins": plugins, "base": base}
    finally:
        if cri is not None:
            for pod_id in cri.pod_ids():
                cri.remove_pod(pod_id)
            cri.close()
        for p in plugins:
            p.stop()
        ctd.stop()
        for d in _cgroup_dirs(parent):
            if d.is_dir():
                rmdir_cgroup_tree(d)
        shutil.rmtree(base, ignore_errors=True)


def test_pod_lifecycle_events_reach_the_plugin_and_synchronize_reports_running_pods(world: dict[str, Any]) -> None:
    ctd: Containerd = world["containerd"]
    cri: CriClient = world["cri"]
    plugin = PluginProcess(ctd.nri_socket)
    world["plugins"].append(plugin)
    plugin.wait_event("synchronized")

    began = time.monotonic()
    pod = cri.run_pod("web-1", "default", "uid-web-1", cgroup_parent=world["parent"], log_dir=world["base"] / "logs")
    pod_s = time.monotonic() - began
    began = time.monotonic()
    cid = cri.create_container(pod, "main", IMAGE, cpu_shares=512, memory_limit=64 << 20)
    cri.start_container(cid)
    container_s = time.monotonic() - began

    ran = plugin.wait_event("state change")
    assert (ran["runtime_event"], ran["pod"]) == ("RUN_POD_SANDBOX", "default/web-1")
    created = plugin.wait_event("create container")
    assert (created["pod"], created["container"], created["id"]) == ("default/web-1", "main", cid)
    n = plugin.events.index(created)
    started = plugin.wait_event("state change", after=n + 1)
    assert (started["runtime_event"], started["container"]) == ("START_CONTAINER", "main")

    # the container runs: its process is the image's /pause, in a cgroup under the test's parent
    pid = cri.container_pid(cid)
    assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] == b"/pause"
    assert world["parent"] in Path(f"/proc/{pid}/cgroup").read_text()

    # a plugin that comes later (hwagent restarted) is told about the running pod by Synchronize
    plugin.proc.kill()
    plugin.proc.wait(5)
    again = PluginProcess(ctd.nri_socket)
    world["plugins"].append(again)
    synced = again.wait_event("synchronized")
    assert (synced["pods"], synced["containers"]) == (1, 1)  # the sandbox itself is a pod, not a container

    cri.remove_pod(pod.id)
    names = []
    deadline = time.monotonic() + 10
    while "REMOVE_POD_SANDBOX" not in names and time.monotonic() < deadline:
        try:
            again.wait_event("__none__", timeout=0.3)
        except AssertionError:
            pass
        names = [e.get("runtime_event") for e in again.events if e["event"] == "state change"]
    assert [e for e in ("STOP_POD_SANDBOX", "REMOVE_CONTAINER", "REMOVE_POD_SANDBOX") if e not in names] == []
    assert any(e["event"] == "stop container" and e["container"] == "main" for e in again.events)
    print(f"\nRunPodSandbox {pod_s * 1000:.0f} ms, CreateContainer+StartContainer {container_s * 1000:.0f} ms "
          f"with hwagent's plugin registered")
