"""A dry run is admission's own decision: same verdict, same reason, same placement
(issue 21). Each case here is one the dry run and the admission once answered
differently."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent.workloads.errors import AdmissionError
from tests.unit.workloads.admission_node import MACHINES, Node

M2 = MACHINES[0]  # 2 NUMA nodes x 4 cpus, example.com/dev d0-0 on node 0 and d1-0 on node 1
RES = "example.com/dev"


def pod(name: str, *, qos: str = "dedicated_cores", cpus=(2,), devices: int = 0) -> str:
    ann = {"katalyst.kubewharf.io/qos_level": qos}
    if qos == "dedicated_cores":
        ann["katalyst.kubewharf.io/memory_enhancement"] = '{"numa_binding": "true"}'
    containers = []
    for i, n in enumerate(cpus):
        limits = {"cpu": str(n)} | ({RES: devices} if devices else {})
        containers.append({"name": f"c{i}", "command": ["sleep", "1"], "resources": {"limits": limits}})
    return json.dumps({"metadata": {"name": name, "annotations": ann}, "spec": {"containers": containers}})


def run(tmp_path, policy, scope, body):
    async def main():
        node = await Node(tmp_path, M2, policy, scope).start()
        try:
            await body(node.workloads)
        finally:
            await node.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


async def same_refusal(w, manifest: str) -> AdmissionError:
    """The dry run refuses, and the admission refuses with the same reason."""
    dry = await w.admit_manifest(manifest, dry_run=True)
    with pytest.raises(AdmissionError) as ei:
        await w.admit_manifest(manifest)
    assert not dry.would_admit, f"dry run admitted what admission refused: {ei.value.code}: {ei.value.message}"
    assert ei.value.message == f"{dry.reason}; {dry.free}"
    return ei.value


def test_dry_run_applies_the_policys_shared_cores_check(tmp_path):
    # with a shared pod running, a dedicated pod that would bind the last NUMA node
    # the shared pool has leaves no cpu for shared_cores: refused, by the dry run too
    async def body(w):
        await w.admit_manifest(pod("web", qos="shared_cores", cpus=(1,)))
        await w.admit_manifest(pod("d1", cpus=(2,)))  # node 0 bound: shared keep node 1
        e = await same_refusal(w, pod("d2", cpus=(3,)))  # only node 1 has 3 free cpus
        assert e.code == "RESOURCE_EXHAUSTED"
        assert "would leave no cpu for the shared_cores containers" in e.message

    run(tmp_path, "single-numa-node", "container", body)


def test_policy_none_with_pod_scope_places_each_container_and_the_dry_run_agrees(tmp_path):
    # policy none asks no hints: 3 + 3 dedicated cpus go on a node each, although the
    # sum does not fit one node; the dry run once added them up and refused
    async def body(w):
        manifest = pod("two", cpus=(3, 3))
        dry = await w.admit_manifest(manifest, dry_run=True)
        assert dry.would_admit, dry.reason
        got = (await w.admit_manifest(manifest)).pod
        for d in dry.decisions:
            a = got.assignments[d.name]
            assert (d.cpus, d.mems, d.affinity) == (a.cpus, a.mems, a.numa_affinity)
        assert {len(got.assignments[c].mems) for c in ("c0", "c1")} == {1}
        assert got.assignments["c0"].mems != got.assignments["c1"].mems

    run(tmp_path, "none", "pod", body)


@pytest.mark.parametrize("policy", ["none", "best-effort"])
def test_a_dedicated_container_with_no_room_left_is_resource_exhausted_not_invalid(tmp_path, policy):
    # the first container takes node 1; no node has 3 cpus left for the second: the
    # pod is valid, the node is full (it was INVALID_ARGUMENT "needs a non-empty
    # topology hint", after a dry run that said it would be admitted)
    async def body(w):
        await w.admit_manifest(pod("hog", cpus=(3,)))  # node 0: 1 cpu left
        e = await same_refusal(w, pod("two", cpus=(3, 3)))
        assert e.code == "RESOURCE_EXHAUSTED", e.message
        assert "no NUMA node combination has 3 free cpus" in e.message
        assert len(w.registry) == 1

    run(tmp_path, policy, "container", body)


def test_the_dry_run_shows_the_placement_admission_then_makes(tmp_path):
    async def body(w):
        await w.admit_manifest(pod("hog", cpus=(3,)))
        manifest = pod("web", cpus=(1, 2), devices=1)  # two devices on two nodes: c0 on node 0, c1 on node 1
        before = (w.cpu_policy.allocations(), w.cpu_policy.pools())
        allocs = [a for a in w.device_manager.allocations()]
        dry = await w.admit_manifest(manifest, dry_run=True)
        assert (w.cpu_policy.allocations(), w.cpu_policy.pools()) == before
        assert w.device_manager.allocations() == allocs
        assert [d.name for d in dry.decisions] == ["c0", "c1"]
        got = (await w.admit_manifest(manifest)).pod
        for d in dry.decisions:
            a = got.assignments[d.name]
            assert d.cpus and d.cpus == a.cpus and d.mems == a.mems and d.affinity == a.numa_affinity
            assert {r: tuple(i for rr, i, _ in d.devices if rr == r) for r, _, _ in d.devices} == a.devices
        c0, c1 = dry.decisions
        assert c0.devices == ((RES, "d0-0", (0,)),) and c1.devices == ((RES, "d1-0", (1,)),)

    run(tmp_path, "single-numa-node", "container", body)


def test_policy_none_reports_no_preferred_node_but_the_node_a_bound_pod_gets(tmp_path):
    # the kubelet's none merges no hint (not preferred); a NUMA-bound dedicated container is
    # bound to a node all the same, and the dry run says which, as ps and describe of the
    # admitted pod do (issue 37 item 9: "NUMA affinity any" beside "memory nodes 0")
    async def body(w):
        dry = await w.admit_manifest(pod("web", cpus=(1,)), dry_run=True)
        (d,) = dry.decisions
        assert d.affinity == frozenset(d.mems) and len(d.mems) == 1 and d.preferred is False

    run(tmp_path, "none", "container", body)


def test_the_api_and_the_cli_show_the_placement(tmp_path):
    from agent.commands.admit import decision_line
    from agent.workloads.podjson import decision_json
    from agent.workloads.server import AdmissionServicer

    async def body(w):
        dry = await w.admit_manifest(pod("web", cpus=(2,), devices=1), dry_run=True)
        (d,) = AdmissionServicer(w)._admit_response(dry).decisions
        ((node,),) = {tuple(d.numa_nodes)}
        cpus = sorted(dry.decisions[0].cpus)
        assert (list(d.cpu_ids), list(d.mems), d.any_node) == (cpus, [node], False)
        assert [(x.resource, x.id, list(x.numa_nodes)) for x in d.devices] == [(RES, f"d{node}-0", [node])]
        line = decision_line(decision_json(d))
        assert line.startswith(f"  c0: NUMA {node} (preferred), cpus ") and f"memory nodes {node}" in line
        assert line.endswith(f"devices {RES}=d{node}-0 (NUMA {node})"), line
        assert decision_json(d) == {
            "name": "c0", "numa_nodes": [node], "preferred": True, "admit": True, "reason": "",
            "cpu_ids": cpus, "mems": [node], "devices": [{"resource": RES, "id": f"d{node}-0", "numa_nodes": [node]}],
        }

    run(tmp_path, "single-numa-node", "container", body)
