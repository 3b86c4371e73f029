"""Standalone mode's residual cleanup asks ACTIVE_PODS which pods still exist; the registry knows
only admission's pods, so the NRI front's pods join it (NRI_PODS), or the CPU policy would take
their CPUs back after residual_cleanup_s. Before the runtime's first Synchronize every pod held for
the front counts (a gone pod cannot be told from one not reported yet); after it, the runtime's."""

from __future__ import annotations


from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.contracts import ActivePods
from agent.cpu.periodic import ResidualTracker
from agent.nri.component import NriComponent
from agent.nri.config import NriConfig
from agent.nri.placement import Placer
from agent.nri.plugin import NriPlugin
from agent.pods import JoinedActivePods, StaticActivePods
from tests.unit.nri.test_placement import Node, nri_container, on_node


def test_joined_sources_answer_once_the_later_one_is_published() -> None:
    nri_pods: list[ActivePods] = []
    joined = JoinedActivePods(StaticActivePods({"admitted"}), lambda: nri_pods[0] if nri_pods else None)
    assert joined.active_pod_uids() == {"admitted"}
    nri_pods.append(StaticActivePods({"nri-1"}))
    assert joined.active_pod_uids() == {"admitted", "nri-1"}


def test_nri_pods_survive_residual_cleanup_before_and_after_synchronize() -> None:
    async def body(node: Node, placer: Placer) -> None:
        await placer.create(*nri_container("kept", "/kubepods/podkept", shares=1024, quota=100_000))
        await placer.create(*nri_container("gone", "/kubepods/podgone", shares=1024, quota=100_000))
        comp = NriComponent(NriConfig(enabled=True, socket_path="/nonexistent/nri.sock"))
        comp.plugin = NriPlugin(comp.cfg, placer=placer)
        active = JoinedActivePods(node.workloads, lambda: comp)
        held = {a.pod_uid for a in node._engine.allocations()}
        # the registry alone (what ACTIVE_PODS was) would make both residual
        tracker = ResidualTracker(0.0)
        assert tracker.due(held, node.workloads.active_pod_uids(), 1.0) == ["gone", "kept"]
        # hwagent just started, the runtime not yet heard from: both kept
        assert ResidualTracker(0.0).due(held, active.active_pod_uids(), 1.0) == []
        # the runtime's Synchronize names only "kept": "gone" is residual (Synchronize releases it too)
        pod, ctr = nri_container("kept", "/kubepods/podkept", state=nri.CONTAINER_RUNNING)
        await comp.plugin.synchronize(nri.SynchronizeRequest(pods=[pod], containers=[ctr]))
        assert active.active_pod_uids() >= {"kept"} and "gone" not in active.active_pod_uids()
        assert {a.pod_uid for a in node._engine.allocations()} == {"kept"}

    on_node(body)


