"""Cases of the merge beyond the kubelet's tables: each branch of the non-preferred
choice, the refusal's diagnosis, and bad input."""

from __future__ import annotations

import pytest

from agent.topologymanager import Decision, TopologyManager, TopologyManagerConfig
from agent.contracts.hints import TopologyHint

from .fakes import H
from .kubelet_reference import Reference

FOUR = [0, 1, 2, 3]


def merge(policy, providers, nodes=FOUR, **cfg) -> Decision:
    return TopologyManager(TopologyManagerConfig(policy=policy, **cfg), nodes).merge(providers)


def ref(policy, providers, nodes=FOUR):
    as_ref = [{r: (None if hs is None else [(None if h.affinity is None else sum(1 << n for n in h.affinity),
                                             h.preferred) for h in hs]) for r, hs in p.items()} for p in providers]
    (mask, pref), _ = Reference(nodes).merge(policy, as_ref)
    return TopologyHint(None if mask is None else frozenset(n for n in nodes if mask >> n & 1), pref)


# Non-preferred results: the kubelet steers towards the largest of the resources'
# narrowest counts (the "target"). One case per branch of that choice.
NON_PREFERRED = [
    pytest.param(
        [{"r1": [H([0, 1, 2], False)]}, {"r2": [H([0], False), H([0, 1], False)]}],
        H([0, 1], False), id="below-the-target-the-larger-count-wins",
    ),
    pytest.param(
        # each resource's narrowest mask meets nothing of the other's: every
        # candidate is above the target of 1 node
        [{"r1": [H([0], False), H([2, 3], False), H([2, 3, 4], False)]}, {"r2": [H([1], False), H([2, 3, 4], False)]}],
        H([2, 3], False), id="only-above-the-target-the-fittest-wins",
    ),
    pytest.param(
        [{"r1": [H([0, 1, 2, 3], False), H([1, 2], False)]}, {"r2": [H([1, 2, 3], False), H([0, 1, 2], False)]}],
        H([0, 1, 2], False), id="at-the-target-beats-a-smaller-count",
    ),
    pytest.param(
        [{"r1": [H([0, 1], False), H([2, 3], False)]}, {"r2": [H([2, 3], False), H([0, 1], False)]}],
        H([0, 1], False), id="equal-counts-lower-nodes-win",
    ),
]


@pytest.mark.parametrize("providers, expected", NON_PREFERRED)
def test_non_preferred_choice(providers, expected):
    nodes = [0, 1, 2, 3, 4]
    assert merge("best-effort", providers, nodes=nodes).hint == expected
    assert ref("best-effort", providers, nodes=nodes) == expected


def test_none_policy_merges_nothing():
    # the kubelet's none policy: TopologyHint{} (any node, not preferred), admitted
    d = merge("none", [{"cpu": []}])
    assert d == Decision(TopologyHint(None, False), True)


def test_hints_outside_the_machine_are_masked_off():
    # node 7 does not exist on a 4-node machine; the AND with all nodes drops it
    d = merge("best-effort", [{"cpu": [H([1, 7])]}])
    assert d.hint == H([1]) and d.hint.preferred


def test_refusal_names_the_resource_that_cannot_be_placed_alone():
    d = merge("single-numa-node", [
        {"cpu": [H([0]), H([1]), H([0, 1], False)]},
        {"example.com/gpu": [H([0, 1])]},
    ], nodes=[0, 1])
    assert not d.admit
    assert d.resource == "example.com/gpu"
    assert d.reason.startswith("topology affinity error (policy single-numa-node): example.com/gpu has no preferred")
    assert "cpu=[{0}, {1}, {0,1} (not preferred)]" in d.reason
    assert "example.com/gpu=[{0,1}]" in d.reason
    assert d.tried == ()


def test_refusal_names_the_resource_without_which_the_others_align():
    d = merge("restricted", [
        {"cpu": [H([0]), H([1])]},
        {"memory": [H([0]), H([1])]},
        {"example.com/gpu": [H([2])]},
    ])
    assert not d.admit
    assert d.resource == "example.com/gpu"
    assert "example.com/gpu cannot be aligned with cpu, memory" in d.reason
    # no permutation had a common node, so nothing non-empty was tried
    assert d.tried == () and "no mask could be tried" in d.reason


def test_refusal_lists_the_masks_tried_best_first():
    d = merge("restricted", [{"cpu": [H([0]), H([1])]}, {"example.com/gpu": [H([0, 1]), H([0, 1, 2], False)]}])
    assert not d.admit and d.resource == ""
    # {0} and {1} are each inside both gpu hints, but never equal to one: not preferred
    assert d.tried == (frozenset({0}), frozenset({1}))
    assert d.reason.endswith("masks tried (none preferred): {0}, {1}")
    assert "cpu, example.com/gpu cannot be aligned together" in d.reason


def test_an_unsatisfiable_resource_is_named():
    d = merge("restricted", [{"cpu": [H([0])]}, {"example.com/gpu": []}])
    assert d.resource == "example.com/gpu" and "example.com/gpu=unsatisfiable" in d.reason


def test_many_tried_masks_are_cut_short_in_the_reason():
    nodes = list(range(8))
    wide = [H(list(range(k + 1)), False) for k in range(8)] + [H([k], False) for k in range(1, 8)]
    d = merge("restricted", [{"cpu": wide}], nodes=nodes)
    assert len(d.tried) == 15 and "and 7 more" in d.reason and "\n" not in d.reason


@pytest.mark.parametrize("bad, err", [
    (lambda: TopologyHint(frozenset({-1}), True), ValueError),
    (lambda: TopologyHint(frozenset({True}), True), ValueError),
    (lambda: TopologyHint("01", True), TypeError),
    (lambda: TopologyHint(3, True), TypeError),
])
def test_bad_hints_are_refused_on_construction(bad, err):
    with pytest.raises(err):
        bad()


def test_a_hint_from_a_plain_set_is_normalised():
    h = TopologyHint({1, 0}, True)  # type: ignore[arg-type]
    assert h.affinity == frozenset({0, 1}) and hash(h) == hash(H([0, 1]))


def test_a_provider_returning_something_else_than_hints_is_a_clear_error():
    with pytest.raises(TypeError, match="hints for 'cpu' must be TopologyHint"):
        merge("best-effort", [{"cpu": [(frozenset({0}), True)]}])


@pytest.mark.parametrize("nodes, distances, match", [
    ([0, 0], None, "unique"),
    ([], None, "at least one"),
    ([0, -1], None, ">= 0"),
    ([0, 1], {0: {0: 10, 1: 20}}, "no distance from NUMA node 1"),
    ([0, 1], {0: {0: 10}, 1: {0: 20, 1: 10}}, "no distance from NUMA node 0 to 1"),
])
def test_bad_machines_are_refused(nodes, distances, match):
    with pytest.raises(ValueError, match=match):
        TopologyManager(TopologyManagerConfig(policy="best-effort", prefer_closest_numa_nodes=True), nodes, distances)


def test_prefer_closest_ranks_equal_sized_masks_by_distance():
    # node 0 is far from 1 and close to 2: {0,2} beats the numerically smaller {0,1}
    dist = {0: {0: 10, 1: 30, 2: 11}, 1: {0: 30, 1: 10, 2: 30}, 2: {0: 11, 1: 30, 2: 10}}
    hints = [{"cpu": [H([0, 1]), H([0, 2])]}]
    closest = TopologyManager(TopologyManagerConfig(policy="best-effort", prefer_closest_numa_nodes=True),
                              [0, 1, 2], dist)
    assert closest.merge(hints).hint == H([0, 2])
    assert merge("best-effort", hints, nodes=[0, 1, 2]).hint == H([0, 1])
    # single-numa-node never applies it (the kubelet's rule); distances are still checked
    snn = TopologyManager(TopologyManagerConfig(policy="single-numa-node", prefer_closest_numa_nodes=True),
                          [0, 1, 2], dist)
    assert snn.merge([{"cpu": [H([2]), H([0])]}]).hint == H([0])


def test_policy_none_does_not_need_distances_even_with_prefer_closest():
    TopologyManager(TopologyManagerConfig(policy="none", prefer_closest_numa_nodes=True), [0, 1])
