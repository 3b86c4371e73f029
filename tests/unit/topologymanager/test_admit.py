"""TopologyManager.admit() with fake providers: order of calls, scopes, refusal, rollback."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import REGISTRY

from agent.topologymanager import (
    TopologyAffinityError,
    TopologyHint,
    TopologyManager,
    TopologyManagerConfig,
)

from .fakes import FakeProvider, H, Pod, ProviderFailure

ANY = TopologyHint(None, True)


def manager(policy: str = "single-numa-node", scope: str = "container", nodes=(0, 1)) -> TopologyManager:
    return TopologyManager(TopologyManagerConfig(policy=policy, scope=scope), list(nodes))


def run(coro):
    return asyncio.run(coro)


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def test_container_scope_aligns_each_container_and_allocates_in_provider_order():
    cpu = FakeProvider("cpu", hints={
        "a": {"cpu": [H([0]), H([1]), H([0, 1], False)]},
        "b": {"cpu": [H([1]), H([0, 1], False)]},
    })
    dev = FakeProvider("dev", hints={
        "a": {"example.com/gpu": [H([1])]},
        "b": {"example.com/gpu": None},
    })
    got = run(manager().admit(Pod("p1"), ["a", "b"], [cpu, dev]))
    assert got == {"a": H([1]), "b": H([1])}
    # hints for a from both, then a allocated in both, then b: the kubelet's order
    assert cpu.names() == ["container_hints", "allocate", "container_hints", "allocate"]
    assert dev.allocated == {("p1", "a"): H([1]), ("p1", "b"): H([1])}
    assert cpu.allocated == dev.allocated


def test_pod_scope_asks_once_and_gives_every_container_the_same_hint():
    cpu = FakeProvider("cpu", pod_level={"cpu": [H([0]), H([1])]})
    dev = FakeProvider("dev", pod_level={"example.com/gpu": [H([0]), H([0, 1], False)]})
    got = run(manager(scope="pod").admit(Pod("p1"), ["init", "main"], [cpu, dev]))
    assert got == {"init": H([0]), "main": H([0])}
    assert cpu.names() == ["pod_hints", "allocate", "allocate"]
    assert [c[2] for c in cpu.calls if c[0] == "allocate"] == ["init", "main"]
    assert not any(c[0] == "container_hints" for c in cpu.calls + dev.calls)


def test_refusal_releases_everything_already_allocated_and_names_the_resource():
    cpu = FakeProvider("cpu", hints={"a": {"cpu": [H([0])]}, "b": {"cpu": [H([0])]}})
    dev = FakeProvider("dev", hints={"a": {}, "b": {"example.com/gpu": [H([0, 1])]}})
    before = sample("hwagent_topology_manager_admission_errors_total")
    with pytest.raises(TopologyAffinityError) as ei:
        run(manager().admit(Pod("p1"), ["a", "b"], [cpu, dev]))
    err = ei.value
    assert err.resource == "example.com/gpu"
    assert "container 'b'" in str(err) and "example.com/gpu" in str(err) and "\n" not in str(err)
    # a had been allocated; the refusal of b undid it in every provider
    assert cpu.allocated == {} and dev.allocated == {}
    assert cpu.calls[-1] == ("release", "p1") and dev.calls[-1] == ("release", "p1")
    assert not any(c[0] == "allocate" and c[2] == "b" for c in cpu.calls)
    assert sample("hwagent_topology_manager_admission_errors_total") == before + 1


def test_second_provider_failure_rolls_back_the_first():
    cpu = FakeProvider("cpu", hints={"a": {"cpu": [H([0])]}})
    dev = FakeProvider("dev", hints={"a": {"example.com/gpu": [H([0])]}}, fail_allocate=frozenset({"a"}))
    with pytest.raises(ProviderFailure, match="dev: allocate a failed"):
        run(manager().admit(Pod("p1"), ["a"], [cpu, dev]))
    assert ("allocate", "p1", "a", H([0])) in cpu.calls
    assert cpu.allocated == {} and dev.allocated == {}
    assert cpu.names()[-1] == "release" and dev.names()[-1] == "release"


def test_a_failing_release_is_logged_and_the_original_error_still_raised(caplog):
    cpu = FakeProvider("cpu", hints={"a": {"cpu": [H([0])]}}, fail_release=True)
    dev = FakeProvider("dev", hints={"a": {}}, fail_allocate=frozenset({"a"}))
    with caplog.at_level(logging.ERROR, logger="hwagent.topologymanager"):
        with pytest.raises(ProviderFailure, match="dev: allocate a failed"):
            run(manager().admit(Pod("p1"), ["a"], [cpu, dev]))
    assert any(r.getMessage() == "rollback release failed" and r.fields["provider"] == "cpu" for r in caplog.records)
    # the provider after the failing release was still asked to release
    assert dev.names()[-1] == "release"


def test_hint_failure_rolls_back_too():
    cpu = FakeProvider("cpu", hints={"a": {"cpu": [H([0])]}, "b": {}})
    dev = FakeProvider("dev", fail_hints=frozenset({"b"}))
    with pytest.raises(ProviderFailure):
        run(manager().admit(Pod("p1"), ["a", "b"], [cpu, dev]))
    assert cpu.allocated == {} and dev.allocated == {}


def test_policy_none_allocates_every_container_with_the_any_hint_and_asks_no_hints():
    cpu = FakeProvider("cpu", hints={"a": {"cpu": []}})
    got = run(manager(policy="none").admit(Pod("p1"), ["a", "b"], [cpu]))
    assert got == {"a": ANY, "b": ANY}
    assert cpu.names() == ["allocate", "allocate"]


def test_best_effort_admits_what_restricted_refuses():
    hints = {"a": {"cpu": [H([0])]}}
    dev_hints = {"a": {"example.com/gpu": [H([1])]}}
    got = run(manager(policy="best-effort").admit(
        Pod("p1"), ["a"], [FakeProvider("cpu", hints=hints), FakeProvider("dev", hints=dev_hints)]))
    assert got["a"].preferred is False
    with pytest.raises(TopologyAffinityError):
        run(manager(policy="restricted").admit(
            Pod("p1"), ["a"], [FakeProvider("cpu", hints=hints), FakeProvider("dev", hints=dev_hints)]))


def test_metrics_count_requests_and_observe_duration():
    req = sample("hwagent_topology_manager_admission_requests_total")
    count = sample("hwagent_topology_manager_admission_duration_seconds_count")
    errors = sample("hwagent_topology_manager_admission_errors_total")
    run(manager().admit(Pod("p1"), ["a"], [FakeProvider("cpu")]))
    assert sample("hwagent_topology_manager_admission_requests_total") == req + 1
    assert sample("hwagent_topology_manager_admission_duration_seconds_count") == count + 1
    assert sample("hwagent_topology_manager_admission_errors_total") == errors


def test_duplicate_container_names_are_refused_before_anything_happens():
    cpu = FakeProvider("cpu")
    with pytest.raises(ValueError, match="repeated: a"):
        run(manager().admit(Pod("p1"), ["a", "b", "a"], [cpu]))
    assert cpu.calls == []


def test_concurrent_admissions_are_serialised():
    """The second pod's hints are asked only after the first pod allocated."""
    order: list[str] = []

    class Slow(FakeProvider):
        async def allocate(self, pod, container, hint):
            order.append(f"allocate-start {pod.uid}")
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            order.append(f"allocate-end {pod.uid}")
            await super().allocate(pod, container, hint)

        async def container_hints(self, pod, container):
            order.append(f"hints {pod.uid}")
            return await super().container_hints(pod, container)

    async def both():
        tm = manager()
        p = Slow("cpu")
        await asyncio.gather(tm.admit(Pod("p1"), ["a"], [p]), tm.admit(Pod("p2"), ["a"], [p]))

    run(both())
    assert order == ["hints p1", "allocate-start p1", "allocate-end p1",
                     "hints p2", "allocate-start p2", "allocate-end p2"]


@pytest.mark.parametrize("cfg, nodes, match", [
    (dict(policy="restricted"), range(9), "more than 8 NUMA nodes"),
    (dict(policy="single-numa-node", max_allowable_numa_nodes=16), range(17), "more than 16 NUMA nodes"),
    (dict(policy="best-effort", prefer_closest_numa_nodes=True), range(2), "distance matrix"),
])
def test_construction_refusals(cfg, nodes, match):
    with pytest.raises(ValueError, match=match):
        TopologyManager(TopologyManagerConfig(**cfg), list(nodes))


def test_more_nodes_than_the_limit_is_fine_for_policy_none_and_within_a_raised_limit():
    TopologyManager(TopologyManagerConfig(policy="none"), list(range(64)))
    TopologyManager(TopologyManagerConfig(policy="restricted", max_allowable_numa_nodes=9), list(range(9)))


@pytest.mark.parametrize("cfg, match", [
    (dict(policy="strict"), "policy: must be one of"),
    (dict(scope="node"), "scope: must be one of"),
    (dict(max_allowable_numa_nodes=7), "at least 8"),
])
def test_bad_config_is_refused(cfg, match):
    with pytest.raises(ValueError, match=match):
        TopologyManager(TopologyManagerConfig(**cfg), [0])


def test_pod_scope_refusal_allocates_nothing():
    cpu = FakeProvider("cpu", pod_level={"cpu": [H([0])]})
    dev = FakeProvider("dev", pod_level={"example.com/gpu": [H([1])]})
    with pytest.raises(TopologyAffinityError) as ei:
        run(manager(scope="pod").admit(Pod("p1"), ["a", "b"], [cpu, dev]))
    assert str(ei.value).startswith("pod: topology affinity error (policy single-numa-node)")
    assert ei.value.tried == ()
    assert not any(c[0] == "allocate" for c in cpu.calls + dev.calls)
    assert cpu.names() == ["pod_hints", "release"] and dev.names() == ["pod_hints", "release"]


def test_a_cancelled_admission_is_rolled_back():
    """A caller that gives up (a gRPC deadline) must not leave half an allocation."""
    started = asyncio.Event()

    class Hanging(FakeProvider):
        async def allocate(self, pod, container, hint):
            started.set()
            await asyncio.Event().wait()

    cpu = FakeProvider("cpu", hints={"a": {"cpu": [H([0])]}})
    dev = Hanging("dev", hints={"a": {}})

    async def scenario():
        task = asyncio.create_task(manager().admit(Pod("p1"), ["a"], [cpu, dev]))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert cpu.allocated == {} and cpu.names()[-1] == "release" and dev.names()[-1] == "release"


def test_the_error_survives_pickling_with_its_fields():
    import pickle

    e = TopologyAffinityError("why", "cpu", (frozenset({0}),))
    back = pickle.loads(pickle.dumps(e))
    assert (str(back), back.resource, back.tried) == ("why", "cpu", (frozenset({0}),))
