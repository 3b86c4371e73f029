"""The real daemon's views of pods run through containerd's CRI, and its answer to a static kubelet CPU manager.

hwagent runs as its own process (standalone mode: CPU policy, memory manager, device manager with
hwagent's own pod-resources server, admission, the NRI component, status) beside a private
containerd 1.7 with NRI on (``tests.integration.nri.placement_world``). Pods are created as the
kubelet would (cgroup parents of its shape under a test-owned subtree). Checked from outside, as
an operator or a monitoring agent would: `hwagent status` and `hwagent ps` list each pod with the
namespace, name, container and QoS of its sandbox's metadata, `hwagent describe` shows one;
hwagent's pod-resources List names it with its container and the CPUs hwagent placed it on;
after the pods are removed, every view forgets them.

Then the kubelet's CPU manager: with a kubelet root dir whose ``cpu_manager_state`` says
``static`` (the kubelet's own checkpoint format), hwagent places nothing (the container keeps
every CPU, no adjustment), status says PLACEMENT REFUSED with the fix; once the file says
``none``, the next pod is placed.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.api.podresources.v1 import api_pb2 as pr
from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc
from agent.cpuset import CPUSet
from agent.rootpaths import POD_RESOURCES, POD_RESOURCES_SOCKET
from tests.integration.daemon.test_lifecycle import Daemon
from tests.integration.nri.containerd import skip_reason
from tests.integration.nri.placement_world import World, readback, wait_for, world_of

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(300)]

_SKIP = skip_reason() or (None if shutil.which("gcc") and shutil.which("ctr") else "needs gcc and ctr")
if _SKIP:
    pytestmark.append(pytest.mark.skip(reason=_SKIP))

COMPONENTS = ("agent.cpu.component:create", "agent.memory.component:create", "agent.devicemanager.component:factory",
              "agent.workloads.component:factory", "agent.nri.component:factory", "agent.status.component:factory")
#: the kubelet's checkpoints as its own code writes them (tests/peer/kubelet: cpumstate)
STATIC = {"policyName": "static", "defaultCpuSet": "0,3", "entries": {"uid-1": {"main": "1-2"}}, "checksum": 3182780036}
NONE = {"policyName": "none", "defaultCpuSet": "", "checksum": 1353318690}


def _start(w: World, kubelet_root: Path) -> Daemon:
    """World's daemon config, with hwagent's pod-resources server and the given kubelet root dir."""
    cfg = w.config()
    text, key = cfg.read_text(), f'kubelet_root_dir = "{kubelet_root}"'
    if re.search(r"(?m)^kubelet_root_dir = ", text):
        text = re.sub(r"(?m)^kubelet_root_dir = .*$", key.replace("\\", "\\\\"), text)
    elif "[daemon]\n" in text:
        text = text.replace("[daemon]\n", f"[daemon]\n{key}\n", 1)
    else:
        text += f"\n[daemon]\n{key}\n"
    cfg.write_text(text)
    d = Daemon(w.base / "hw", "--config", str(cfg), components=COMPONENTS)
    w.daemons.append(d)
    wait_for("hwagent registered with containerd", lambda: w.nri_state(d).get("registered"), 60)
    return d


def _status(w: World) -> dict[str, Any]:
    return json.loads(w.hw("status", "--format", "json").stdout)


def _status_pods(w: World) -> set[tuple[str, str, str, tuple[str, ...]]]:
    return {(p["namespace"], p["name"], p["qos"], tuple(p["containers"])) for p in _status(w)["pods"]}


def _pod_resources(w: World) -> dict[tuple[str, str, str], CPUSet]:
    """(namespace, pod, container) -> cpu_ids, as hwagent's own pod-resources server lists them."""
    with grpc.insecure_channel(f"unix:{w.root / POD_RESOURCES / POD_RESOURCES_SOCKET}") as ch:
        res = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=30)
    return {(p.namespace, p.name, c.name): CPUSet(c.cpu_ids) for p in res.pod_resources for c in p.containers}


def test_status_and_pod_resources_name_cri_pods_then_forget_them() -> None:
    with world_of("nri-views-d-") as w:
        kubelet = w.base / "kubelet"
        kubelet.mkdir()
        (kubelet / "cpu_manager_state").write_text(json.dumps(NONE))
        _start(w, kubelet)
        gpod, _, g = w.run("db-0", "Guaranteed", milli=1000)
        bpod, _, _ = w.run("web-1", "Burstable", milli=500)
        epod, _, _ = w.run("batch-7", "BestEffort")
        # opted out of placement: hwagent holds nothing for it, yet every view names it
        opod, _, _ = w.run("raw-3", "Burstable", milli=200, annotations={"hwagent.io/nri": "ignore"})
        names = {"db-0", "web-1", "batch-7", "raw-3"}

        expected = {("default", "db-0", "dedicated", ("main",)), ("default", "web-1", "shared", ("main",)),
                    ("default", "batch-7", "reclaimed", ("main",)), ("default", "raw-3", "shared", ("main",))}
        wait_for("status lists the CRI pods", lambda: _status_pods(w) >= expected)
        assert "NRI runtime at" in _status(w)["pods_source"]

        want = {("default", n, "main") for n in names}
        listed = wait_for("pod-resources lists the CRI pods",
                          lambda: (lambda got: got if want <= set(got) else None)(_pod_resources(w)))
        # the dedicated container's CPUs are the ones hwagent placed it on, as the kernel has them
        assert listed[("default", "db-0", "main")] == readback(g)["cgroup_cpus"] and len(listed[
            ("default", "db-0", "main")]) == 1
        assert listed[("default", "raw-3", "main")] == CPUSet()  # listed, holding nothing

        # hwagent ps (root) lists them under the directory's source; describe shows one as the directory has it
        ps = w.hw("ps").stdout
        assert "named by NRI runtime at" in ps, ps
        rows = {tuple(line.split()[:4]) for line in ps.split("named by", 1)[1].splitlines()[1:] if line.strip()}
        assert {("default", "db-0", "main", "dedicated"), ("default", "web-1", "main", "shared"),
                ("default", "batch-7", "main", "reclaimed"), ("default", "raw-3", "main", "shared")} <= rows, ps
        described = w.hw("describe", "default/db-0")
        assert described.returncode == 0, described.stderr
        assert described.stdout.startswith("default/db-0: named by NRI runtime at"), described.stdout
        assert "  main: qos dedicated, cgroup /hwagent-nri-core-" in described.stdout

        for pod in (gpod, bpod, epod, opod):
            w.cri.remove_pod(pod.id)
        wait_for("status forgets them", lambda: not {p for p in _status_pods(w) if p[1] in names})
        assert "db-0" not in w.hw("ps").stdout
        gone = w.hw("describe", "default/db-0", check=False)
        assert gone.returncode == 3 and "no pod default/db-0" in gone.stderr, (gone.returncode, gone.stderr)
        wait_for("pod-resources forgets them", lambda: not _pod_resources(w))


def test_a_static_kubelet_cpu_manager_stops_placement_until_it_is_none() -> None:
    with world_of("nri-views-k-") as w:
        kubelet = w.base / "kubelet"
        kubelet.mkdir()
        (kubelet / "cpu_manager_state").write_text(json.dumps(STATIC))
        _start(w, kubelet)
        online = CPUSet.parse(Path("/sys/devices/system/cpu/online").read_text().strip())

        _, _, g = w.run("db-0", "Guaranteed", milli=1000)
        detail = w.status_detail()
        assert "PLACEMENT REFUSED: the kubelet's CPU manager is static" in detail, detail
        assert "cpuManagerPolicy: none" in detail and str(kubelet / "cpu_manager_state") in detail
        assert readback(g)["cpus_allowed"] == online  # no adjustment: the runtime's default, every CPU
        assert not [uid for uid in w.allocations() if uid.startswith("db-0")]  # the CPU policy holds nothing for it

        (kubelet / "cpu_manager_state").write_text(json.dumps(NONE))  # the operator's fix
        wait_for("placement resumed", lambda: "PLACEMENT REFUSED" not in w.status_detail(), 30)
        _, _, g2 = w.run("db-1", "Guaranteed", milli=1000)
        got = readback(g2)
        assert len(got["cgroup_cpus"]) == 1 and got["cpus_allowed"] == got["cgroup_cpus"]
