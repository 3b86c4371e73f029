"""The kubelet's policy test tables, run against TopologyManager.merge().

The tables are in kubelet_policy_cases.toml (its header explains the notation
and which machine each table runs on, as in the kubelet's tests).
"""

from __future__ import annotations

import pytest

from agent.topologymanager import TopologyManager, TopologyManagerConfig
from agent.contracts.hints import TopologyHint
from agent.topologymanager.merge import ResourceHints, _best_non_preferred_count, _single_numa_filter
from agent.topologymanager.numa import mask_of

from .kubelet_reference import Reference
from .tables import CASES, case_id, machine, parse_expected, parse_hint, parse_providers


def tables(*names: str) -> list[tuple[str, dict]]:
    return [(n, c) for n in names for c in CASES[n]]


# (policy, machine, prefer_closest, tables): the kubelet's Test*Merge functions
RUNS = [
    ("best-effort", "four", False, ("common", "best_effort", "best_effort_narrowest")),
    ("best-effort", "eight", True, ("common", "best_effort", "best_effort_closest")),
    ("restricted", "four", False, ("common", "best_effort", "best_effort_narrowest")),
    ("restricted", "eight", True, ("common", "best_effort", "best_effort_closest")),
    ("single-numa-node", "four", False, ("common", "single_numa_node")),
]

PARAMS = [
    pytest.param(policy, m, closest, case, id=f"{policy}-{m}{'-closest' if closest else ''}-{table}-{case_id(case)}")
    for policy, m, closest, names in RUNS
    for table, case in tables(*names)
]


def test_the_tables_are_all_there():
    # a guard against an edited data file silently dropping rows
    counts = {k: len(v) for k, v in CASES.items() if isinstance(v, list)}
    assert counts == {
        "common": 9, "best_effort": 17, "best_effort_narrowest": 2, "best_effort_closest": 4,
        "single_numa_node": 12, "single_numa_filter": 5, "max_of_min_affinity_counts": 7, "compare": 25,
    }
    assert len(PARAMS) == 2 * (9 + 17 + 2) + 2 * (9 + 17 + 4) + (9 + 12)


@pytest.mark.parametrize("policy, machine_name, closest, case", PARAMS)
def test_merge_matches_the_kubelet_table(policy, machine_name, closest, case):
    nodes, distances = machine(machine_name)
    tm = TopologyManager(
        TopologyManagerConfig(policy=policy, prefer_closest_numa_nodes=closest), nodes, distances
    )
    expected = parse_expected(case["expect"], nodes)
    decision = tm.merge(parse_providers(case["providers"]))
    assert decision.hint == expected
    # best-effort admits everything; the others exactly the preferred results
    assert decision.admit is (policy == "best-effort" or expected.preferred)
    assert bool(decision.reason) is not decision.admit


@pytest.mark.parametrize("policy, machine_name, closest, case", PARAMS)
def test_the_reference_model_matches_the_kubelet_table(policy, machine_name, closest, case):
    """The oracle of the property tests must itself pass the kubelet's tables."""
    nodes, distances = machine(machine_name)
    ref = Reference(nodes, distances, prefer_closest=closest)
    providers = [
        {r: (None if hs is None else [(None if h.affinity is None else mask_of(h.affinity), h.preferred) for h in hs])
         for r, hs in p.items()}
        for p in parse_providers(case["providers"])
    ]
    (mask, pref), _ = ref.merge(policy, providers)
    expected = parse_expected(case["expect"], nodes)
    assert (mask, pref) == (None if expected.affinity is None else mask_of(expected.affinity), expected.preferred)


def _lists(rows: list[list[str]]) -> list[ResourceHints]:
    out = []
    for i, row in enumerate(rows):
        hints = [parse_hint(h) for h in row]
        out.append(ResourceHints(
            f"r{i}", tuple((None if h.affinity is None else mask_of(h.affinity), h.preferred) for h in hints), tuple(hints)
        ))
    return out


@pytest.mark.parametrize("case", CASES["single_numa_filter"], ids=case_id)
def test_single_numa_filter_matches_the_kubelet_table(case):
    got = [[(None if m is None else m, p) for m, p in e.hints] for e in _single_numa_filter(_lists(case["input"]))]
    want = [[e for e in entry.hints] for entry in _lists(case["output"])]
    assert got == want


@pytest.mark.parametrize("case", CASES["max_of_min_affinity_counts"], ids=lambda c: str(c["input"]))
def test_best_non_preferred_count_matches_the_kubelet_table(case):
    lists = [e.hints for e in _lists(case["input"])]
    assert _best_non_preferred_count(lists) == case["output"]
    assert Reference.max_of_min_counts(lists) == case["output"]


def _ref_hint(text: str):
    if text == "none":
        return None
    h = parse_hint(text)
    return (mask_of(h.affinity or ()), h.preferred)


@pytest.mark.parametrize("case", CASES["compare"], ids=case_id)
def test_reference_compare_matches_the_kubelet_table(case):
    current, candidate = _ref_hint(case["current"]), _ref_hint(case["candidate"])
    got = Reference([]).compare(current, candidate, case["target"], closest=False)
    assert got is (current if case["expect"] == "current" else candidate)


def test_single_numa_node_on_one_node_reports_any():
    """A one-node machine: the only single-node mask is all nodes, which the kubelet turns into nil."""
    tm = TopologyManager(TopologyManagerConfig(policy="single-numa-node"), [0])
    d = tm.merge([{"cpu": [TopologyHint(frozenset({0}), True)]}])
    assert d.hint == TopologyHint(None, True) and d.admit
