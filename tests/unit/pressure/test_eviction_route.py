"""Issue 21: one eviction route. Whatever acts on a pressure eviction, the pod's
resources are released through the registry's owner of the pod (admission), so
its status, its CPUs and its devices are released together; the pressure
engine never releases anything itself, never builds nor swaps the action: it
looks up ``EVICTOR`` (the runtime in standalone mode, the eviction plugin in
kubelet mode) and reports when nobody is there to act.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from agent.config import section_defaults
from agent.kubelet.config import KubeletConfig
from agent.kubelet.evictionplugin import EvictionPluginComponent, KatalystDecides
from agent.pressure.engine import PressureEngine
from agent.contracts.pressure import Eviction
from agent.runtime.eviction import RuntimeEviction
from agent.contracts.pods import PodPhase, PodStatus
from tests.unit.workloads.admission_node import MACHINES, Node

RECLAIMED = {"katalyst.kubewharf.io/qos_level": "reclaimed_cores"}


def _manifest(name: str) -> str:
    return json.dumps({"metadata": {"name": name, "annotations": RECLAIMED},
                       "spec": {"containers": [{"name": "c", "command": ["sleep", "1"],
                                                "resources": {"limits": {"cpu": "1", "example.com/dev": 1}}}]}})


def _eviction(uid: str) -> Eviction:
    return Eviction(uid, "default", "victim", ("c",), "reclaim", "cpu_pressure_hard", "runqueue_delay", 0.0,
                    {"pool_pressure": 0.9})


def _held(node: Node, uid: str) -> tuple[bool, bool, bool]:
    """(registry says not released, CPU policy holds CPUs, device manager holds devices)."""
    rec = node.workloads.registry.record(uid)
    assert rec is not None
    return (not rec.released, uid in node.cpu_policy.state.entries,
            any(a.pod_uid == uid for a in node.manager.allocations()))


def _engine(tmp_path: Path, node: Node, **kw) -> PressureEngine:
    cfg = section_defaults().sections["pressure"]
    return PressureEngine(cfg, cpu=node.workloads.cpu_policy, mode="standalone",
                          record_path=tmp_path / "evictions.jsonl", **kw)


def test_an_eviction_without_an_evictor_releases_nothing_behind_the_registrys_back(tmp_path: Path) -> None:
    """Standalone without a runtime: the eviction is reported, and the pod's record, its
    CPUs and its devices stay together (they used to be released straight from the
    CPU policy and the device manager while the registry still said Running)."""

    async def main() -> None:
        node = await Node(tmp_path / "node", MACHINES[0], "best-effort", "container").start()
        try:
            pod = (await node.workloads.admit_manifest(_manifest("victim"))).pod
            assert pod is not None and _held(node, pod.uid) == (True, True, True)
            eng = _engine(tmp_path, node)
            eng._evict(_eviction(pod.uid))
            assert _held(node, pod.uid) == (True, True, True), "released behind the registry's back"
            assert eng.record.recent[-1]["pod_uid"] == pod.uid
        finally:
            await node.stop()

    asyncio.run(main())


class EvictingRuntime:
    """The runtime's side of an eviction, as ``WorkloadRuntime`` does it: the pod is
    stopped and its terminal status goes to the registry's owner (admission)."""

    def __init__(self, sink, subtree: str = "/hwagent.slice") -> None:
        self.sink, self.subtree = sink, subtree

    def owns_cgroup(self, rel_path: str) -> bool:
        return rel_path.startswith(self.subtree + "/")

    async def evict(self, uid: str, message: str) -> None:
        await self.sink.pod_status_changed(uid, PodStatus(phase=PodPhase.FAILED, reason="Evicted", message=message))


def test_a_standalone_eviction_releases_status_cpus_and_devices_together(tmp_path: Path) -> None:
    async def main() -> None:
        node = await Node(tmp_path / "node", MACHINES[0], "best-effort", "container").start()
        try:
            pod = (await node.workloads.admit_manifest(_manifest("victim"))).pod
            assert pod is not None
            evictor = RuntimeEviction(EvictingRuntime(node.workloads), asyncio.get_running_loop())  # type: ignore[arg-type]
            eng = _engine(tmp_path, node, evictor=lambda: evictor)
            assert eng.evictor() is evictor
            paths = [f"/hwagent.slice/pod{pod.uid}/c"]
            out = await asyncio.get_running_loop().run_in_executor(None, evictor.execute, _eviction(pod.uid), paths)
            assert out["evicted"] is True
            deadline = time.monotonic() + 30
            while _held(node, pod.uid) != (False, False, False):
                assert time.monotonic() < deadline, _held(node, pod.uid)
                await asyncio.sleep(0.01)
            rec = node.workloads.registry.record(pod.uid)
            assert rec is not None and rec.status.reason == "Evicted"
        finally:
            await node.stop()

    asyncio.run(main())


def test_in_kubelet_mode_the_eviction_plugin_is_asked_while_katalyst_holds_it(tmp_path: Path) -> None:
    """Nothing is swapped in the engine: the plugin's evictor accepts while Katalyst
    holds the registration, and pressure's own report runs otherwise."""
    plugin = EvictionPluginComponent(KubeletConfig(plugin_registration_dir=str(tmp_path)))
    evictor = KatalystDecides(plugin)
    eng = PressureEngine(section_defaults().sections["pressure"], mode="kubelet", evictor=lambda: evictor)
    assert eng.evictor() is eng.report
    plugin.set_registered(True, "")
    assert eng.evictor() is evictor
    eng._evict(_eviction("u-1"))
    assert eng.record.recent[-1]["action"] == "katalyst"
    assert eng.record.recent[-1]["outcome"] == {"deferred_to": "katalyst eviction manager"}
    plugin.set_registered(False, "refused")
    assert eng.evictor() is eng.report
    assert not hasattr(eng, "action")
