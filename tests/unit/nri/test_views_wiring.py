"""The NRI component's part in the views and beside the kubelet's CPU manager.

It publishes the pod directory (joined by the kubelet's, started after it), and while the
kubelet's CPU manager is not ``none`` (a kubelet root dir of fixture files) it places nothing:
each container gets no adjustment, status says why and the fix; fixed, it places again.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.config import loads
from agent.contracts import POD_DIRECTORY, DaemonContext
from agent.contracts.nri import NRI_PLUGIN, summary
from agent.nri import component as nri_component
from agent.nri.directory import NriPodDirectorySource
from agent.nri.placement import Placer, adjustment
from agent.topology.model import synthetic
from tests.unit.nri.test_placement import nri_container, on_node

STATIC = {"policyName": "static", "defaultCpuSet": "0,3", "entries": {"uid-1": {"main": "1-2"}}, "checksum": 3182780036}
NONE = {"policyName": "none", "defaultCpuSet": "", "checksum": 1353318690}


def test_a_paused_placer_answers_no_adjustment_and_holds_nothing() -> None:
    async def body(node, placer: Placer) -> None:  # type: ignore[no-untyped-def]
        placer.paused = "the kubelet's CPU manager is static"
        pod, ctr = nri_container("g1", "/kubepods/podg1", shares=1024, quota=100_000)
        d = await placer.create(pod, ctr)
        assert (d.outcome, d.reason, d.level) == ("off", "the kubelet's CPU manager is static", "dedicated_cores")
        assert adjustment(d, False) is None and not placer.held("g1", "main") and placer.counters.adjusted == 0
        placer.paused = ""
        d = await placer.create(pod, ctr)
        assert d.outcome == "adjusted" and placer.held("g1", "main") and d.cpus is not None and len(d.cpus) == 1

    on_node(body)


def test_the_component_publishes_the_directory_and_pauses_on_a_static_kubelet(tmp_path: Path) -> None:
    kubelet = tmp_path / "kubelet"
    kubelet.mkdir()
    (kubelet / "cpu_manager_state").write_text(json.dumps(STATIC))
    sock = tmp_path / "nri.sock"
    cfg = loads(f'[nri]\nenabled = true\nsocket_path = "{sock}"\nreconnect_interval_s = 0.05\n'
                f'[daemon]\nkubelet_root_dir = "{kubelet}"\n')
    ctx = DaemonContext(cfg, tmp_path, synthetic(), mode="kubelet")

    async def go() -> None:
        comp = nri_component.factory(ctx)
        assert comp is not None
        await comp.start(ctx)
        try:
            directory = ctx.lookup(POD_DIRECTORY)
            assert isinstance(directory, NriPodDirectorySource) and directory.view is comp.plugin.view
            pod, ctr = nri_container("b1", "/kubepods/burstable/podb1", shares=512)
            ctr.linux.cgroups_path = "/kubepods/burstable/podb1/ct-b1-main"
            comp.plugin.view.container_event(nri.CREATE_CONTAINER, pod, ctr)
            assert [(c.namespace, c.pod, c.container, c.qos) for c in directory.current.containers] == [
                ("default", "pod-b1", "main", "shared")]

            st = ctx.lookup(NRI_PLUGIN).state()  # type: ignore[union-attr]
            assert "static" in st["kubelet_cpu_manager"] and "cpuManagerPolicy: none" in st["placement_paused"]
            assert "PLACEMENT REFUSED: the kubelet's CPU manager is static" in summary(st)
            assert comp.plugin.placer.paused

            (kubelet / "cpu_manager_state").write_text(json.dumps(NONE))  # the operator's fix
            await comp._check_cpu_manager()  # what the component does every CPU_MANAGER_RECHECK_S
            st = ctx.lookup(NRI_PLUGIN).state()  # type: ignore[union-attr]
            assert st["placement_paused"] == "" and "PLACEMENT REFUSED" not in summary(st)
            assert "policy none" in st["kubelet_cpu_manager"]
        finally:
            await comp.stop()

    asyncio.run(go())


def test_describe_finds_a_directory_pod_by_namespace_and_name() -> None:
    from agent.commands.describe import describe_named, directory_pod

    entries = [{"namespace": "shop", "pod": "db-0", "container": "main", "qos": "dedicated", "cgroup": "/k/p/c"},
               {"namespace": "shop", "pod": "db-0", "container": "", "qos": "dedicated", "cgroup": "/k/p/s"},
               {"namespace": "default", "pod": "db-0", "container": "main", "qos": "shared", "cgroup": "/k/q/c"}]
    found = directory_pod(entries, "default", "shop/db-0")  # NAMESPACE/NAME names its namespace
    assert [e["cgroup"] for e in found] == ["/k/p/s", "/k/p/c"]  # the sandbox first
    assert directory_pod(entries, "shop", "web") == []
    lines = describe_named({"source": "NRI runtime at /run/nri.sock"}, found)
    assert lines[0].startswith("shop/db-0: named by NRI runtime at /run/nri.sock")
    assert lines[2:] == ["  (pod sandbox): qos dedicated, cgroup /k/p/s", "  main: qos dedicated, cgroup /k/p/c"]
