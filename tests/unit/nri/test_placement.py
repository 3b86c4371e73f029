"""The NRI front's decisions over the real owners (CPU policy with its journal, memory manager,
topology manager) of a fixture machine: each container gets what standalone admission's dry run
decides for the equivalent manifest; refusals run unadjusted and are repaired; Synchronize
reconciles as the restore after kill -9 does; moved placements become updates."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.cpuset import CPUSet
from agent.nri.placement import Decision, Placer, adjustment, update_for
from tests.unit.workloads.admission_node import MACHINES, Node

KATALYST = "katalyst.kubewharf.io/qos_level"
MEM_ENH = "katalyst.kubewharf.io/memory_enhancement"
TWO_NODES = MACHINES[0]  # 2 NUMA nodes x 4 CPUs


def nri_container(uid: str, parent: str, *, shares: int = 2, quota: int = 0, memory: int = 0,
                  annotations: dict[str, str] | None = None, name: str = "main",
                  state: int = nri.CONTAINER_UNKNOWN) -> tuple[nri.PodSandbox, nri.Container]:
    """What containerd's NRI tells a plugin of a kubelet's container."""
    pod = nri.PodSandbox(id=f"sb-{uid}", name=f"pod-{uid}", namespace="default", uid=uid,
                         annotations=annotations or {})
    pod.linux.cgroup_parent = parent
    ctr = nri.Container(id=f"ct-{uid}-{name}", pod_sandbox_id=f"sb-{uid}", name=name, state=state)
    r = ctr.linux.resources
    r.cpu.shares.value = shares
    if quota:
        r.cpu.quota.value, r.cpu.period.value = quota, 100_000
    if memory:
        r.memory.limit.value = memory
    return pod, ctr


def manifest(uid: str, level: str, cpu: str | None, extra: dict[str, str] | None = None) -> str:
    """The pod manifest standalone admission would be given for the same container."""
    res = {"limits": {"cpu": cpu}} if cpu else {}
    return json.dumps({"metadata": {"name": f"dry-{uid}", "annotations": {KATALYST: level, **(extra or {})}},
                       "spec": {"containers": [{"name": "main", "command": ["sleep", "1"], "resources": res}]}})


def on_node(body: Callable[[Node, Placer], Awaitable[Any]], mode: str = "exclusive-cores") -> Any:
    async def go() -> Any:
        base = Path(tempfile.mkdtemp(prefix="nri-place-"))
        node = await Node(base, TWO_NODES, "single-numa-node", "container", mode).start()  # type: ignore[arg-type]
        placer = Placer(node.workloads.topology_manager, cpu_policy=node._engine)
        try:
            return await body(node, placer)
        finally:
            await node.stop()
    return asyncio.run(go())


async def dry(node: Node, m: str) -> tuple[CPUSet | None, CPUSet | None]:
    res = await node.workloads.admit_manifest(m, dry_run=True)
    assert res.would_admit, res.reason
    d = res.decisions[0]
    return d.cpus, d.mems


CASES = [
    # (uid, cgroup parent, shares, quota, pod annotations, the equivalent manifest's level, cpu, extra)
    ("g2", "/kubepods/podg2", 2048, 200_000, {}, "dedicated_cores", "2", {MEM_ENH: '{"numa_binding": "true"}'}),
    ("b1", "/kubepods/burstable/podb1", 512, 0, {}, "shared_cores", "500m", {}),
    ("be", "/kubepods/besteffort/podbe", 2, 0, {}, "reclaimed_cores", None, {}),
    ("k1", "/kubepods/burstable/podk1", 1024, 0, {KATALYST: "dedicated_cores", MEM_ENH: '{"numa_binding":"true"}'},
     "dedicated_cores", "1", {MEM_ENH: '{"numa_binding":"true"}'}),
    ("g1", "/kubepods/podg1", 1024, 100_000, {}, "dedicated_cores", "1", {MEM_ENH: '{"numa_binding": "true"}'}),
    ("gf", "/kubepods/podgf", 1536, 150_000, {}, "shared_cores", "1500m", {}),
]


def test_each_decision_is_the_dry_run_of_the_equivalent_manifest() -> None:
    async def body(node: Node, placer: Placer) -> None:
        held: dict[str, CPUSet] = {}
        for uid, parent, shares, quota, ann, level, cpu, extra in CASES:
            want = await dry(node, manifest(uid, level, cpu, extra))
            d = await placer.create(*nri_container(uid, parent, shares=shares, quota=quota, annotations=ann))
            assert d.outcome == "adjusted", d
            assert d.level == level
            assert (d.cpus, d.mems) == want, (uid, d, want)
            if level == "dedicated_cores":
                assert d.cpus is not None and not any(d.cpus & h for h in held.values()), "double-booked"
                held[uid] = d.cpus
        # the dedicated ones hold their CPUs in the CPU policy, none twice
        alloc = {a.pod_uid: a.cpuset for a in node._engine.allocations() if a.qos_level == "dedicated_cores"}
        assert alloc == held
        assert placer.counters.adjusted == len(CASES) and placer.counters.failed == 0

    on_node(body)


def test_the_answer_carries_cpus_mems_and_the_reclaimed_cpu_class() -> None:
    ded = Decision("d/p", "main", "adjusted", "", "dedicated_cores", cpus=CPUSet({0, 1}), mems=CPUSet({0}))
    adj = adjustment(ded, v2=False)
    assert adj is not None
    assert (adj.linux.resources.cpu.cpus, adj.linux.resources.cpu.mems) == ("0-1", "0")
    assert not adj.linux.resources.cpu.HasField("shares") and not adj.linux.resources.unified
    rec = Decision("d/p", "main", "adjusted", "", "reclaimed_cores", cpus=CPUSet({4, 5}))
    v1, v2 = adjustment(rec, v2=False), adjustment(rec, v2=True)
    assert v1 is not None and v2 is not None
    assert v1.linux.resources.cpu.shares.value == 2 and not v1.linux.resources.unified
    # v2: idle, and shares present as 0 so runc writes no cpu.weight (refused on an idle group)
    assert dict(v2.linux.resources.unified) == {"cpu.idle": "1"}
    assert v2.linux.resources.cpu.HasField("shares") and v2.linux.resources.cpu.shares.value == 0
    assert adjustment(Decision("d/p", "main", "refused", "no"), v2=False) is None
    assert update_for("ct-1", rec, v2=True).linux.resources.unified["cpu.idle"] == "1"


def test_opted_out_containers_get_nothing_and_hold_nothing() -> None:
    async def body(node: Node, placer: Placer) -> None:
        d = await placer.create(*nri_container("x", "/kubepods/podx", shares=2048, quota=200_000,
                                               annotations={"hwagent.io/nri": "ignore"}))
        assert d.outcome == "ignored" and adjustment(d, v2=False) is None
        assert node._engine.allocations() == []
        # with [nri] honor_opt_out = false the same container is placed as its class says
        strict = Placer(placer.tm, cpu_policy=placer.cpu_policy, allow_opt_out=False)
        d = await strict.create(*nri_container("x", "/kubepods/podx", shares=2048, quota=200_000,
                                               annotations={"hwagent.io/nri": "ignore"}))
        assert d.outcome == "adjusted" and d.level == "dedicated_cores"

    on_node(body)


def test_a_refused_container_runs_unadjusted_and_is_placed_once_resources_free() -> None:
    async def body(node: Node, placer: Placer) -> None:
        first = await placer.create(*nri_container("g3", "/kubepods/podg3", shares=3072, quota=300_000))
        whole = await placer.create(*nri_container("g4", "/kubepods/podg4", shares=4096, quota=400_000))
        assert (first.outcome, whole.outcome) == ("adjusted", "adjusted")
        # no NUMA node has 4 free CPUs left: refused by the topology manager, counted, nothing held
        refused = await placer.create(*nri_container("late", "/kubepods/podlate", shares=4096, quota=400_000))
        assert refused.outcome == "refused" and "topology affinity" in refused.reason
        assert adjustment(refused, v2=False) is None
        assert placer.counters.failed == 1 and list(placer.unadjusted) == ["ct-late-main"]
        assert "late" not in {a.pod_uid for a in node._engine.allocations()}
        assert await placer.repair() == []  # still nowhere to go: stays unadjusted
        assert list(placer.unadjusted) == ["ct-late-main"]
        # the first pod goes: the repair places the refused one on the node it freed
        assert await placer.release_pod("g3")
        [(cid, d)] = await placer.repair()
        assert cid == "ct-late-main" and d.outcome == "adjusted" and d.cpus is not None and len(d.cpus) == 4
        assert whole.cpus is not None and not (d.cpus & whole.cpus)
        assert placer.unadjusted == {}

    on_node(body)


def test_synchronize_reconciles_as_the_restore_after_kill_9() -> None:
    async def body(node: Node, placer: Placer) -> None:
        gone = nri_container("gone", "/kubepods/podgone", shares=2048, quota=200_000, state=nri.CONTAINER_RUNNING)
        kept = nri_container("kept", "/kubepods/podkept", shares=1024, quota=100_000, state=nri.CONTAINER_RUNNING)
        assert (await placer.create(*gone)).outcome == "adjusted"
        d_kept = await placer.create(*kept)
        # a pod standalone admission holds is another front's: never released by this one
        own = await node.workloads.admit_manifest(manifest("own", "dedicated_cores", "1",
                                                           {MEM_ENH: '{"numa_binding": "true"}'}))
        registry = node.workloads.registry
        placer.foreign = lambda uid: registry.get(uid) is not None
        # hwagent restarts: a new placer over the same owners (their journals), and the runtime's
        # Synchronize no longer has "gone" but has "new", created while hwagent was down
        again = Placer(node.workloads.topology_manager, cpu_policy=node._engine, foreign=placer.foreign)
        new = nri_container("new", "/kubepods/podnew", shares=2048, quota=200_000, state=nri.CONTAINER_RUNNING)
        kept[1].linux.resources.cpu.cpus = str(d_kept.cpus)
        kept[1].linux.resources.cpu.mems = str(d_kept.mems)
        updates, released, decisions = await again.synchronize([kept[0], new[0]], [kept[1], new[1]])
        assert released == ["gone"]
        assert [d.outcome for d in decisions] == ["held", "adjusted"]
        assert again.counters.adjusted == 1  # "kept" was held already: one new placement
        assert [u.container_id for u in updates] == ["ct-new-main"]  # "kept" already runs where it should
        cpus = {a.pod_uid: a.cpuset for a in node._engine.allocations() if a.qos_level == "dedicated_cores"}
        assert set(cpus) == {"kept", "new", own.pod.uid}
        sets = list(cpus.values())
        assert sum(len(s) for s in sets) == len({c for s in sets for c in s}), f"double-booked: {cpus}"
        assert CPUSet.parse(updates[0].linux.resources.cpu.cpus) == cpus["new"]

    on_node(body)


def test_a_shrinking_shared_pool_becomes_updates_for_running_shared_containers() -> None:
    async def body(node: Node, placer: Placer) -> None:
        shared = await placer.create(*nri_container("s", "/kubepods/burstable/pods", shares=1024))
        assert shared.cpus == CPUSet(range(8))  # ramping up: every CPU shared pods may use
        _end_ramp_up(node)
        before = placer.current("s", "main")[0]
        # the ramp-up's end moved it into its pool: one update, then nothing more to tell
        assert [u.container_id for u in placer.pending_updates()] == (["ct-s-main"] if before != shared.cpus else [])
        ded = await placer.create(*nri_container("d", "/kubepods/podd", shares=2048, quota=200_000))
        assert ded.outcome == "adjusted" and ded.cpus is not None
        after = placer.current("s", "main")[0]
        assert after is not None and before is not None and not (after & ded.cpus), (before, after, ded.cpus)
        ups = placer.pending_updates()
        if after != before:
            assert [u.container_id for u in ups] == ["ct-s-main"]
            assert CPUSet.parse(ups[0].linux.resources.cpu.cpus) == after
        assert placer.pending_updates() == []  # told once

    on_node(body)


def _end_ramp_up(node: Node) -> None:
    pol = node._engine.policy
    pol.clock = lambda: 1e12  # type: ignore[method-assign]
    pol.complete_ramp_up()


if __name__ == "__main__":
    pytest.main([__file__])


def test_the_advisors_resize_of_the_shared_pool_becomes_an_update() -> None:
    async def body(node: Node, placer: Placer) -> None:
        await placer.create(*nri_container("s", "/kubepods/burstable/pods", shares=1024))
        _end_ramp_up(node)
        placer.pending_updates()
        before = placer.current("s", "main")[0]
        assert before is not None and len(before) == 4
        # the advisor's call (SharedPoolSizer.resize_shared): a 3-CPU shared pool
        assert await node._engine.resize_shared(3)
        after = placer.current("s", "main")[0]
        assert after is not None and len(after) == 3
        [u] = placer.pending_updates()
        assert u.container_id == "ct-s-main" and CPUSet.parse(u.linux.resources.cpu.cpus) == after

    on_node(body)
