"""TopologyManager.decide() with fake providers: order of calls, scopes, refusal.

The providers place containers in their own plans; the manager holds no lock
and rolls nothing back (its caller, admission, serialises admissions and
commits only a whole decision)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from agent.topologymanager import ANY_HINT, TopologyAffinityError, TopologyManager, TopologyManagerConfig
from agent.contracts.hints import TopologyHint

from .fakes import FakeProvider, H, Pod, ProviderFailure


def manager(policy: str = "single-numa-node", scope: str = "container", nodes=(0, 1)) -> TopologyManager:
    return TopologyManager(TopologyManagerConfig(policy=policy, scope=scope), list(nodes))


def run(coro):
    return asyncio.run(coro)


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def test_container_scope_aligns_each_container_and_places_in_provider_order():
    cpu = FakeProvider("cpu", hints={
        "a": {"cpu": [H([0]), H([1]), H([0, 1], False)]},
        "b": {"cpu": [H([1]), H([0, 1], False)]},
    })
    dev = FakeProvider("dev", hints={
        "a": {"example.com/gpu": [H([1])]},
        "b": {"example.com/gpu": None},
    })
    got = run(manager().decide(Pod("p1"), ["a", "b"], [cpu, dev]))
    assert got == {"a": H([1]), "b": H([1])}
    # hints for a from both, then a placed in both, then b: the kubelet's order
    assert cpu.names() == ["container_hints", "place", "container_hints", "place"]
    assert dev.placed == {("p1", "a"): H([1]), ("p1", "b"): H([1])}
    assert cpu.placed == dev.placed


def test_pod_scope_asks_once_and_gives_every_container_the_same_hint():
    cpu = FakeProvider("cpu", pod_level={"cpu": [H([0]), H([1])]})
    dev = FakeProvider("dev", pod_level={"example.com/gpu": [H([0]), H([0, 1], False)]})
    got = run(manager(scope="pod").decide(Pod("p1"), ["init", "main"], [cpu, dev]))
    assert got == {"init": H([0]), "main": H([0])}
    assert cpu.names() == ["pod_hints", "place", "place"]
    assert [c[2] for c in cpu.calls if c[0] == "place"] == ["init", "main"]
    assert not any(c[0] == "container_hints" for c in cpu.calls + dev.calls)


def test_refusal_names_the_container_and_resource_and_places_nothing_more():
    cpu = FakeProvider("cpu", hints={"a": {"cpu": [H([0])]}, "b": {"cpu": [H([0])]}})
    dev = FakeProvider("dev", hints={"a": {}, "b": {"example.com/gpu": [H([0, 1])]}})
    before = sample("hwagent_topology_manager_admission_errors_total")
    with pytest.raises(TopologyAffinityError) as ei:
        run(manager().decide(Pod("p1"), ["a", "b"], [cpu, dev]))
    err = ei.value
    assert err.resource == "example.com/gpu"
    assert "container 'b'" in str(err) and "example.com/gpu" in str(err) and "\n" not in str(err)
    # b was never placed; a's placement lives only in the providers' plans, which the caller drops
    assert not any(c[0] == "place" and c[2] == "b" for c in cpu.calls + dev.calls)
    assert sample("hwagent_topology_manager_admission_errors_total") == before + 1


def test_a_provider_failure_is_raised_as_it_is():
    cpu = FakeProvider("cpu", hints={"a": {"cpu": [H([0])]}})
    dev = FakeProvider("dev", hints={"a": {"example.com/gpu": [H([0])]}}, fail_place=frozenset({"a"}))
    with pytest.raises(ProviderFailure, match="dev: place a failed"):
        run(manager().decide(Pod("p1"), ["a"], [cpu, dev]))
    dev = FakeProvider("dev", fail_hints=frozenset({"b"}))
    with pytest.raises(ProviderFailure, match="hints for b failed"):
        run(manager().decide(Pod("p1"), ["a", "b"], [FakeProvider("cpu"), dev]))


def test_policy_none_places_every_container_in_any_node_not_preferred_and_asks_no_hints():
    # the kubelet's none policy answers TopologyHint{} (no affinity, Preferred false)
    assert ANY_HINT == TopologyHint(None, False)
    cpu = FakeProvider("cpu", hints={"a": {"cpu": []}})
    got = run(manager(policy="none").decide(Pod("p1"), ["a", "b"], [cpu]))
    assert got == {"a": ANY_HINT, "b": ANY_HINT}
    assert cpu.names() == ["place", "place"]
    assert run(manager(policy="none", scope="pod").decide(Pod("p1"), ["a", "b"], [cpu])) == got
    assert cpu.names()[2:] == ["place", "place"]


def test_best_effort_admits_what_restricted_refuses():
    hints = {"a": {"cpu": [H([0])]}}
    dev_hints = {"a": {"example.com/gpu": [H([1])]}}
    got = run(manager(policy="best-effort").decide(
        Pod("p1"), ["a"], [FakeProvider("cpu", hints=hints), FakeProvider("dev", hints=dev_hints)]))
    assert got["a"].preferred is False
    with pytest.raises(TopologyAffinityError):
        run(manager(policy="restricted").decide(
            Pod("p1"), ["a"], [FakeProvider("cpu", hints=hints), FakeProvider("dev", hints=dev_hints)]))


def test_metrics_count_admissions_but_not_dry_runs():
    req = sample("hwagent_topology_manager_admission_requests_total")
    count = sample("hwagent_topology_manager_admission_duration_seconds_count")
    errors = sample("hwagent_topology_manager_admission_errors_total")
    run(manager().decide(Pod("p1"), ["a"], [FakeProvider("cpu")]))
    assert sample("hwagent_topology_manager_admission_requests_total") == req + 1
    assert sample("hwagent_topology_manager_admission_duration_seconds_count") == count + 1
    assert sample("hwagent_topology_manager_admission_errors_total") == errors
    run(manager().decide(Pod("p1"), ["a"], [FakeProvider("cpu")], count=False))
    assert sample("hwagent_topology_manager_admission_requests_total") == req + 1


def test_duplicate_container_names_are_refused_before_anything_happens():
    cpu = FakeProvider("cpu")
    with pytest.raises(ValueError, match="repeated: a"):
        run(manager().decide(Pod("p1"), ["a", "b", "a"], [cpu]))
    assert cpu.calls == []


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


def test_pod_scope_refusal_places_nothing():
    cpu = FakeProvider("cpu", pod_level={"cpu": [H([0])]})
    dev = FakeProvider("dev", pod_level={"example.com/gpu": [H([1])]})
    with pytest.raises(TopologyAffinityError) as ei:
        run(manager(scope="pod").decide(Pod("p1"), ["a", "b"], [cpu, dev]))
    assert str(ei.value).startswith("pod: topology affinity error (policy single-numa-node)")
    assert ei.value.tried == ()
    assert cpu.names() == ["pod_hints"] and dev.names() == ["pod_hints"]


def test_the_error_survives_pickling_with_its_fields():
    import pickle

    e = TopologyAffinityError("why", "cpu", (frozenset({0}),))
    back = pickle.loads(pickle.dumps(e))
    assert (str(back), back.resource, back.tried) == ("why", "cpu", (frozenset({0}),))
