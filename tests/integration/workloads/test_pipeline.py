"""The admission pipeline with the real CPU policy, device manager (and a test
device plugin over gRPC), topology manager and on-disk registry, on a 2-NUMA
synthetic topology (this machine has one NUMA node)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agent.cpuset import CPUSet
from agent.workloads.errors import AdmissionError
from agent.contracts.pods import PodPhase, PodStatus
from agent.workloads.store import PodFileStore
from tests.integration.devicemanager.harness import run
from tests.integration.workloads.harness import RES, dev, pipeline, pod_yaml


def _node_of(env, cpus: CPUSet) -> set[int]:
    return {env.policy.idx.numa_of[c] for c in cpus}


def _snapshot(env):
    # the CPU policy's pod entries; its pools are re-sized by every RemovePod (a
    # rolled-back allocation may leave the reclaim pool laid out as adjust() does)
    return (
        env.policy.state.to_json()["pod_entries"],
        sorted((a.pod_uid, a.container_name, a.resource, a.device_ids) for a in env.manager.allocations()),
        sorted(r.uid for r in env.registry.records()),
        sorted(p.name for p in (env.base / "pods").glob("*.json")) if (env.base / "pods").exists() else [],
    )


def test_dedicated_numa_bound_pod_gets_cpus_and_device_on_one_node(sockdir):
    async def main():
        async with pipeline(sockdir) as env:
            res = await env.workloads.admit_manifest(pod_yaml("web", cpus=2, devices=1))
            pod = res.pod
            a = pod.assignments["main"]
            assert len(a.cpus) == 2
            nodes = _node_of(env, a.cpus)
            assert len(nodes) == 1
            (node,) = nodes
            (dev_id,) = a.devices[RES]
            assert dev_id == f"d{node}"
            assert a.mems == CPUSet([node])
            assert a.numa_affinity == frozenset({node})
            assert pod.qos == "dedicated"
            # the plugin's Allocate and PreStartContainer were called, and its response is the grant
            assert env.plugin.calls.allocate == [[dev_id]]
            assert env.plugin.calls.prestart == [[dev_id]]
            assert a.grant.envs["FAKE_DEVICES"] == dev_id
            assert [d.host_path for d in a.grant.devices] == [f"/dev/{dev_id}"]
            # the registry is the active-pods source and is on disk
            assert env.workloads.active_pod_uids() == {pod.uid}
            stored = PodFileStore(env.base / "pods").load()
            assert [r.pod for r in stored] == [pod]

    run(main())


def test_second_pod_goes_to_the_other_node_and_third_is_refused_with_reason(sockdir):
    async def main():
        async with pipeline(sockdir) as env:
            p1 = (await env.workloads.admit_manifest(pod_yaml("a", cpus=4))).pod
            p2 = (await env.workloads.admit_manifest(pod_yaml("b", cpus=4))).pod
            n1 = _node_of(env, p1.assignments["main"].cpus)
            n2 = _node_of(env, p2.assignments["main"].cpus)
            assert n1 != n2 and len(n1) == len(n2) == 1
            before = _snapshot(env)
            with pytest.raises(AdmissionError) as ei:
                await env.workloads.admit_manifest(pod_yaml("c", cpus=1))
            e = ei.value
            assert e.code == "RESOURCE_EXHAUSTED"
            assert f"free per NUMA node: node 0: 0 CPUs, 0 {RES}; node 1: 0 CPUs, 0 {RES}" in e.message, e.message
            assert "\n" not in e.message
            assert _snapshot(env) == before

    run(main())


def test_device_on_the_wrong_node_is_refused_under_single_numa_node(sockdir):
    async def main():
        # the only device is on node 0; node 0's CPUs go to a pod without devices first
        async with pipeline(sockdir, devices=[dev("d0", numa=(0,))]) as env:
            hog = (await env.workloads.admit_manifest(pod_yaml("hog", cpus=4, devices=0))).pod
            assert _node_of(env, hog.assignments["main"].cpus) == {0}
            before = _snapshot(env)
            with pytest.raises(AdmissionError) as ei:
                await env.workloads.admit_manifest(pod_yaml("web", cpus=2, devices=1))
            assert ei.value.code == "RESOURCE_EXHAUSTED"
            msg = ei.value.message
            assert RES in msg and "cpu" in msg and f"free per NUMA node: node 0: 0 CPUs, 1 {RES}; node 1: 4 CPUs, 0 {RES}" in msg, msg
            assert _snapshot(env) == before
            assert env.plugin.calls.allocate == []

    run(main())


def test_plugin_failure_rolls_back_cpus(sockdir):
    async def main():
        async with pipeline(sockdir) as env:
            env.plugin.fail.allocate = grpc.StatusCode.INTERNAL
            before = _snapshot(env)
            with pytest.raises(AdmissionError) as ei:
                await env.workloads.admit_manifest(pod_yaml("web"))
            assert ei.value.code == "UNAVAILABLE"
            assert _snapshot(env) == before
            env.plugin.fail.allocate = None
            env.plugin.fail.prestart = grpc.StatusCode.INTERNAL
            with pytest.raises(AdmissionError):
                await env.workloads.admit_manifest(pod_yaml("web"))
            assert _snapshot(env) == before
            env.plugin.fail.prestart = None
            assert (await env.workloads.admit_manifest(pod_yaml("web"))).pod is not None

    run(main())


def test_unknown_resource_duplicate_name_and_too_many_cpus(sockdir):
    async def main():
        async with pipeline(sockdir) as env:
            with pytest.raises(AdmissionError) as ei:
                await env.workloads.admit_manifest(pod_yaml("x", resource="example.com/nobody"))
            assert ei.value.code == "RESOURCE_EXHAUSTED" and "example.com/nobody" in ei.value.message
            with pytest.raises(AdmissionError) as ei:
                await env.workloads.admit_manifest(pod_yaml("x", cpus=64, devices=0))
            assert ei.value.code == "RESOURCE_EXHAUSTED" and "64" in ei.value.message
            await env.workloads.admit_manifest(pod_yaml("x", cpus=1, devices=0))
            with pytest.raises(AdmissionError) as ei:
                await env.workloads.admit_manifest(pod_yaml("x", cpus=1, devices=0))
            assert ei.value.code == "ALREADY_EXISTS"
            with pytest.raises(AdmissionError) as ei:
                await env.workloads.admit_manifest("metadata: {name: Bad_Name}\nspec: {containers: []}")
            assert ei.value.code == "INVALID_ARGUMENT" and "metadata.name" in ei.value.message
            assert len(env.registry) == 1

    run(main())


def test_concurrent_admissions_never_double_book(sockdir):
    async def main():
        devs = [dev(f"d{i}", numa=(i % 2,)) for i in range(6)]
        async with pipeline(sockdir, devices=devs, policy="best-effort") as env:
            env.plugin.fail.allocate_delay = 0.01  # let admissions overlap inside the plugin call
            results = await asyncio.gather(
                *(env.workloads.admit_manifest(pod_yaml(f"p{i}", cpus=1, devices=1)) for i in range(10)),
                return_exceptions=True,
            )
            ok = [r.pod for r in results if not isinstance(r, BaseException)]
            refused = [r for r in results if isinstance(r, BaseException)]
            assert all(isinstance(r, AdmissionError) and r.code == "RESOURCE_EXHAUSTED" for r in refused)
            assert len(ok) == 6  # one per device
            cpus = [c for p in ok for c in p.assignments["main"].cpus]
            devices = [d for p in ok for d in p.assignments["main"].devices[RES]]
            assert len(cpus) == len(set(cpus)) == 6
            assert sorted(devices) == [f"d{i}" for i in range(6)]
            assert len(env.registry) == 6

    run(main())


def test_terminal_status_releases_but_keeps_the_record_and_remove_forgets(sockdir):
    async def main():
        async with pipeline(sockdir) as env:
            pod = (await env.workloads.admit_manifest(pod_yaml("web", cpus=4))).pod
            uid = pod.uid
            await env.workloads.pod_status_changed(uid, PodStatus(phase=PodPhase.RUNNING))
            assert env.policy.state.get(uid, "main") is not None
            await env.workloads.pod_status_changed(uid, PodStatus(phase=PodPhase.FAILED, reason="Error"))
            assert env.policy.state.get(uid, "main") is None
            assert not [a for a in env.manager.allocations() if a.pod_uid == uid]
            rec = env.registry.record(uid)
            assert rec is not None and rec.released and rec.status.phase is PodPhase.FAILED
            assert uid not in env.workloads.active_pod_uids()
            # the freed node takes another 4-cpu pod
            assert (await env.workloads.admit_manifest(pod_yaml("web2", cpus=4))).pod is not None
            await env.workloads.remove("web")
            assert env.registry.record(uid) is None
            assert not (env.base / "pods" / f"{uid}.json").exists()
            with pytest.raises(AdmissionError) as ei:
                await env.workloads.remove("web")
            assert ei.value.code == "NOT_FOUND"

    run(main())


def test_dry_run_allocates_nothing_and_says_where(sockdir):
    async def main():
        async with pipeline(sockdir) as env:
            before = _snapshot(env)
            res = await env.workloads.admit_manifest(pod_yaml("web"), dry_run=True)
            assert res.dry_run and res.would_admit and res.pod is None
            (d,) = res.decisions
            assert d.affinity is not None and len(d.affinity) == 1
            assert "node 0: 4 CPUs" in res.free and "node 1: 4 CPUs" in res.free, res.free
            assert _snapshot(env) == before
            bad = await env.workloads.admit_manifest(pod_yaml("big", cpus=5), dry_run=True)
            assert not bad.would_admit and "does not fit one NUMA node" in bad.reason
            await env.workloads.admit_manifest(pod_yaml("hog", cpus=4, devices=0))
            late = await env.workloads.admit_manifest(pod_yaml("web", cpus=4), dry_run=True)
            assert late.would_admit and late.decisions[0].affinity == frozenset({1})
            assert f"node 0: 0 CPUs, 1 {RES}; node 1: 4 CPUs, 1 {RES}" in late.free, late.free

    run(main())


def test_policy_none_still_binds_dedicated_cpus_on_one_node(sockdir):
    async def main():
        async with pipeline(sockdir, policy="none") as env:
            pod = (await env.workloads.admit_manifest(pod_yaml("web", cpus=2))).pod
            a = pod.assignments["main"]
            # no alignment asked for: the device lands wherever, the CPUs on one node of the policy's choosing,
            # which is the pod's NUMA affinity as the views show it (issue 37 item 9), not "any"
            assert len(_node_of(env, a.cpus)) == 1 and len(a.devices[RES]) == 1
            assert a.numa_affinity == frozenset(_node_of(env, a.cpus))

    run(main())


def test_pod_scope_puts_every_container_on_the_same_node(sockdir):
    async def main():
        devs = [dev("d0", numa=(0,)), dev("d1", numa=(0,)), dev("d2", numa=(1,)), dev("d3", numa=(1,))]
        async with pipeline(sockdir, scope="pod", devices=devs) as env:
            await env.workloads.admit_manifest(pod_yaml("hog", cpus=1, devices=0))  # node 0 has 3 free now
            pod = (await env.workloads.admit_manifest(pod_yaml("two", cpus=2, containers=("a", "b")))).pod
            a, b = pod.assignments["a"], pod.assignments["b"]
            assert a.numa_affinity == b.numa_affinity == frozenset({1})
            assert _node_of(env, a.cpus) == _node_of(env, b.cpus) == {1}
            assert {a.devices[RES][0], b.devices[RES][0]} == {"d2", "d3"}

    run(main())


def test_init_containers_run_on_the_shared_pool_and_share_devices(sockdir):
    async def main():
        async with pipeline(sockdir) as env:
            text = pod_yaml("web", cpus=2).replace(
                "spec:\n  containers:",
                "spec:\n  initContainers:\n  - name: setup\n    command: [/bin/true]\n"
                f"    resources: {{limits: {{{RES}: 1}}}}\n  containers:",
            )
            pod = (await env.workloads.admit_manifest(text)).pod
            init, main_c = pod.assignments["setup"], pod.assignments["main"]
            # no shared pod yet, so no share pool: the cpus a shared pod would get (not the app's dedicated ones)
            assert init.cpus and init.mems is None and not (init.cpus & main_c.cpus)
            # the kubelet's reuse: the app container takes the init container's device
            assert init.devices[RES] == main_c.devices[RES]
            # ...and each container gets its own Allocate call, as the kubelet makes them
            assert env.plugin.calls.allocate == [list(init.devices[RES])] * 2

    run(main())


def test_a_cancelled_caller_does_not_interrupt_an_admission(sockdir):
    async def main():
        async with pipeline(sockdir) as env:
            env.plugin.fail.allocate_delay = 0.3
            call = asyncio.ensure_future(env.workloads.admit_manifest(pod_yaml("web")))
            await asyncio.sleep(0.1)  # inside the plugin's Allocate
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            # the admission went on and completed: recorded, with its CPUs and device, nothing half-done
            for _ in range(200):
                if len(env.registry):
                    break
                await asyncio.sleep(0.01)
            (rec,) = env.registry.records()
            a = rec.pod.assignments["main"]
            assert env.policy.state.get(rec.uid, "main").cpuset == a.cpus
            assert [x.device_ids for x in env.manager.allocations()] == [a.devices[RES]]

    run(main())


def test_a_large_manifest_is_parsed_off_the_loop(sockdir, monkeypatch):
    import threading

    from agent.workloads import admission

    threads: list[str] = []
    real = admission.parse_manifest

    def spy(*a, **kw):
        threads.append(threading.current_thread().name)
        return real(*a, **kw)

    monkeypatch.setattr(admission, "parse_manifest", spy)

    async def main():
        async with pipeline(sockdir) as env:
            small = pod_yaml("small", cpus=1, devices=0)
            big = pod_yaml("big", cpus=1, devices=0).replace("command: [sleep, '1000']",
                                                              "command: [sleep, '1000', " + ", ".join(["x" * 60] * 100) + "]")
            assert len(small) < admission.INLINE_PARSE_BYTES < len(big)
            await env.workloads.admit_manifest(small)
            await env.workloads.admit_manifest(big)
        assert threads[0] == threading.main_thread().name and threads[1] != threads[0]

    run(main())
